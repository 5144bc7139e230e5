"""Tiny Hugging Face checkpoints written as GGUF files the way llama.cpp's converter
(``convert_hf_to_gguf.py``) writes them: its metadata keys and tensor names, q/k rows permuted
for ``llama`` only, 1-D tensors F32, matrices F32 or a block type, and its precomputed RoPE
tensors (``rope_freqs`` for Llama 3.x scaling, ``rope_factors_long/short`` for Phi-3 longrope).

Shared by the GGUF exactness tests (one per architecture or family); :func:`write_like_llama_cpp`
returns the float weights a reader of the file must end up with, for the transformers oracle.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import gguf
import numpy as np
import torch
from gguf.quants import dequantize, quantize
from safetensors.torch import load_file
from transformers import AutoTokenizer

# Hugging Face layer tensor -> llama.cpp's name (gguf-py TENSOR_NAMES, "blk.{bid}." prefix).
LAYER_NAMES = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.qkv_proj": "attn_qkv", "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
    "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.gate_up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight",
                "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}
# Hugging Face model_type -> GGUF general.architecture (LlamaModel converts Mistral too).
GGUF_ARCH = {"mistral": "llama"}


def gguf_name(hf_name: str) -> str:
    if hf_name in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf_name]
    _, _, layer, rest = hf_name.split(".", 3)
    module, kind = rest.rsplit(".", 1)
    return f"blk.{layer}.{LAYER_NAMES[module]}.{kind}"


def llama_permute(w: torch.Tensor, heads: int) -> torch.Tensor:
    """convert_hf_to_gguf.py's LlamaModel.permute: rotate-half rows -> interleaved pairs."""
    return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).transpose(1, 2)
            .reshape(w.shape))


def stored(w: torch.Tensor, qtype: str) -> tuple[np.ndarray, np.ndarray | None]:
    """The array to write and, for a quantized type, what it dequantizes to."""
    data = w.float().numpy()
    t = getattr(gguf.GGMLQuantizationType, qtype)
    # llama.cpp keeps norms and biases F32, and rows that are no whole number of blocks
    # (Llama's ffn_down: 176 columns) unquantized.
    if qtype == "F32" or data.ndim == 1 or data.shape[-1] % gguf.GGML_QUANT_SIZES[t][0]:
        return data, None
    blocks = quantize(data, t)
    return blocks, np.asarray(dequantize(blocks, t), dtype=np.float32).reshape(data.shape)


def add_tokenizer(w: gguf.GGUFWriter, folder: Path, vocab_size: int, pre: str) -> None:
    """The folder's byte-level BPE as llama.cpp stores a "gpt2" tokenizer: tokens by id (the
    embedding's padding rows as ``[PAD{i}]``, UNUSED), merges, special ids, and ``pre`` (the
    split regex's name)."""
    tok = json.loads((folder / "tokenizer.json").read_text())
    vocab = {**tok["model"]["vocab"], **{a["content"]: a["id"] for a in tok["added_tokens"]}}
    by_id = {i: t for t, i in vocab.items()}
    special = {a["id"] for a in tok["added_tokens"] if a["special"]}
    types = gguf.TokenType
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list([by_id.get(i, f"[PAD{i}]") for i in range(vocab_size)])
    w.add_token_types([types.UNUSED if i not in by_id else types.CONTROL if i in special
                       else types.NORMAL for i in range(vocab_size)])
    w.add_token_merges([" ".join(m) if isinstance(m, list) else m
                        for m in tok["model"]["merges"]])
    cfg = json.loads((folder / "config.json").read_text())
    w.add_bos_token_id(cfg["bos_token_id"])
    w.add_eos_token_id(cfg["eos_token_id"])
    # gguf-py's SpecialVocab sets add_bos_token when the tokenizer prepends BOS.
    w.add_add_bos_token(AutoTokenizer.from_pretrained(folder)("x").input_ids[0]
                        == cfg["bos_token_id"])


def rope_parameters(cfg: dict[str, Any]) -> dict[str, Any]:
    """The folder's RoPE settings in either transformers spelling (5's rope_parameters or
    4's rope_theta + rope_scaling)."""
    return {"rope_theta": cfg.get("rope_theta", 10000.0), **(cfg.get("rope_scaling") or {}),
            **(cfg.get("rope_parameters") or {})}


def llama3_rope_freqs(cfg: dict[str, Any], head_dim: int) -> torch.Tensor:
    """LlamaModel.generate_extra_tensors' ``rope_freqs``: each frequency's divisor under the
    config's ``llama3`` scaling (1 for short wavelengths, ``factor`` for long, smoothed
    between)."""
    rope = rope_parameters(cfg)
    freqs = 1.0 / (rope["rope_theta"] ** (torch.arange(0, head_dim, 2, dtype=torch.float32)
                                          / head_dim))
    factor, low, high = rope["factor"], rope["low_freq_factor"], rope["high_freq_factor"]
    old_len = rope["original_max_position_embeddings"]
    factors = []
    for freq in freqs.tolist():
        wavelen = 2 * math.pi / freq
        if wavelen < old_len / high:
            factors.append(1.0)
        elif wavelen > old_len / low:
            factors.append(factor)
        else:
            smooth = (old_len / wavelen - low) / (high - low)
            factors.append(1 / ((1 - smooth) / factor + smooth))
    return torch.tensor(factors, dtype=torch.float32)


def _add_phi3_parameters(w: gguf.GGUFWriter, cfg: dict[str, Any]) -> dict[str, torch.Tensor]:
    """Phi3MiniModel.set_gguf_parameters' extras; returns its extra (longrope) tensors."""
    rope = rope_parameters(cfg)
    heads = cfg["num_attention_heads"]
    partial = rope.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 1.0))
    w.add_rope_dimension_count(int(partial * cfg["hidden_size"]) // heads)
    original = cfg.get("original_max_position_embeddings") or cfg["max_position_embeddings"]
    w.add_rope_scaling_orig_ctx_len(original)
    w.add_sliding_window(cfg.get("sliding_window") or 0)  # 0: none
    if rope.get("rope_type") not in ("longrope", "su"):
        return {}
    scale = cfg["max_position_embeddings"] / original
    w.add_rope_scaling_attn_factors(
        math.sqrt(1 + math.log(scale) / math.log(original)) if scale > 1.0 else 1.0)
    return {"rope_factors_long.weight": torch.tensor(rope["long_factor"], dtype=torch.float32),
            "rope_factors_short.weight": torch.tensor(rope["short_factor"], dtype=torch.float32)}


def _add_parameters(w: gguf.GGUFWriter, cfg: dict[str, Any], arch: str,
                    head_dim: int) -> dict[str, torch.Tensor]:
    """The architecture's metadata; returns the extra tensors its converter generates."""
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(rope_parameters(cfg)["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    if "head_dim" in cfg and arch != "phi3":  # TextModel.set_gguf_parameters
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "phi3":
        return _add_phi3_parameters(w, cfg)
    if arch == "llama":  # LlamaModel.set_gguf_parameters
        w.add_rope_dimension_count(head_dim)
        if rope_parameters(cfg).get("rope_type") == "llama3":
            return {"rope_freqs.weight": llama3_rope_freqs(cfg, head_dim)}
    return {}


def write_like_llama_cpp(folder: Path, out: Path, qtype: str) -> dict[str, torch.Tensor]:
    """``folder``'s checkpoint as llama.cpp's converter writes it; returns the float weights a
    reader of the file must end up with (by Hugging Face name)."""
    cfg = json.loads((folder / "config.json").read_text())
    arch = GGUF_ARCH.get(cfg["model_type"], cfg["model_type"])
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    w = gguf.GGUFWriter(str(out), arch)
    extra = _add_parameters(w, cfg, arch, head_dim)
    # Qwen files name Qwen2's split (and transformers reads any Qwen folder as Qwen2Tokenizer,
    # which splits so); the tiny Llama's and Phi-3's split with GPT-2's regex.
    add_tokenizer(w, folder, cfg["vocab_size"], "qwen2" if "qwen" in arch else "gpt2")
    for name, t in extra.items():
        w.add_tensor(name, t.numpy())
    expected = {}
    for name, t in load_file(str(folder / "model.safetensors")).items():
        if name == "lm_head.weight" and cfg.get("tie_word_embeddings"):
            continue  # tied: llama.cpp writes no output.weight
        # Quant blocks run along rows, so permuting rows commutes with quantizing.
        _, dequantized = stored(t, qtype)
        expected[name] = t.float() if dequantized is None else torch.from_numpy(dequantized)
        if arch == "llama" and ".self_attn.q_proj." in name:
            t = llama_permute(t, heads)
        elif arch == "llama" and ".self_attn.k_proj." in name:
            t = llama_permute(t, kv)
        data, dequantized = stored(t, qtype)
        raw_dtype = None if dequantized is None else getattr(gguf.GGMLQuantizationType, qtype)
        w.add_tensor(gguf_name(name), data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return expected
