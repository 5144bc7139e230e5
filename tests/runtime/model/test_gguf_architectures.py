"""GGUF files of the ``llama``, ``qwen2`` and ``qwen3`` architectures, written from the tiny
Hugging Face checkpoints in llama.cpp's layout (its metadata keys and tensor names, q/k rows
permuted for ``llama`` only, 1-D tensors F32, matrices F32, Q8_0 or Q4_0), load in radixlm and
equal transformers on the same weights: prefill logits within 1e-4 of the logit scale, greedy tokens
identical; the converted tokenizer encodes as transformers' own reading of the file's tokenizer
metadata. For Q8_0 and Q4_0, transformers gets the gguf package's dequantization of the same
blocks. The oracle is transformers on the Hugging Face folder: its own GGUF loader (5.x) ignores
``attention.key_length`` and so builds these checkpoints (head_dim != hidden / heads) wrong."""

from __future__ import annotations

import json
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import dequantize, quantize
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from radixlm.runtime.model.gguf_checkpoint import GGUFCheckpoint
from radixlm.runtime.model.gguf_conversion import ensure_converted
from radixlm.runtime.model.model_config import ModelConfig
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate
from radixlm.testing.prefill_oracle import assert_prefill_matches_hf

PROMPTS = ["The capital of France is", "Question: What is 3 plus 4?\nAnswer:", "x"]
NEW_TOKENS = 24
REL_TOL = 1e-4  # max |ours - transformers| relative to max |transformers logit|
# Hugging Face layer tensor -> llama.cpp's name (gguf-py TENSOR_NAMES, "blk.{bid}." prefix).
LAYER_NAMES = {
    "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight",
                "model.norm.weight": "output_norm.weight", "lm_head.weight": "output.weight"}


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


def write_like_llama_cpp(folder: Path, out: Path, qtype: str) -> dict[str, torch.Tensor]:
    """``folder``'s checkpoint as llama.cpp's converter writes it; returns the float weights a
    reader of the file must end up with (by Hugging Face name)."""
    cfg = json.loads((folder / "config.json").read_text())
    arch = cfg["model_type"]
    heads, kv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // heads
    w = gguf.GGUFWriter(str(out), arch)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(cfg.get("rope_theta") or cfg["rope_parameters"]["rope_theta"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    w.add_vocab_size(cfg["vocab_size"])
    if "head_dim" in cfg:  # TextModel.set_gguf_parameters
        w.add_key_length(head_dim)
        w.add_value_length(head_dim)
    if arch == "llama":  # LlamaModel.set_gguf_parameters
        w.add_rope_dimension_count(head_dim)
    # Qwen files name Qwen2's split (and transformers reads any Qwen folder as Qwen2Tokenizer,
    # which splits so); the tiny Llama's splits with GPT-2's regex.
    add_tokenizer(w, folder, cfg["vocab_size"], "gpt2" if arch == "llama" else "qwen2")
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


@pytest.fixture(scope="module", params=["llama", "qwen2", "qwen3"])
def arch(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(scope="module")
def hf_folder(arch: str, request: pytest.FixtureRequest) -> Path:
    return request.getfixturevalue(f"tiny_{arch}_path")


@pytest.fixture(scope="module", params=["F32", "Q8_0", "Q4_0"])
def converted(hf_folder: Path, request: pytest.FixtureRequest,
              tmp_path_factory: pytest.TempPathFactory):
    """(the GGUF, radixlm's conversion folder of it, transformers on the file's weights)."""
    tmp = tmp_path_factory.mktemp("gguf-arch")
    expected = write_like_llama_cpp(hf_folder, tmp / "m.gguf", request.param)
    folder = ensure_converted(tmp / "m.gguf", tmp / "cache")
    hf = AutoModelForCausalLM.from_pretrained(hf_folder, dtype=torch.float32).eval()
    params = hf.state_dict()
    with torch.no_grad():
        for name, w in expected.items():
            params[name].copy_(w)
    return tmp / "m.gguf", folder, hf


def test_the_config_names_the_architecture_and_its_fields(arch, hf_folder, tmp_path):
    write_like_llama_cpp(hf_folder, tmp_path / "m.gguf", "F32")
    ours = ModelConfig.from_dict(GGUFCheckpoint(tmp_path / "m.gguf").hf_config())
    ref = ModelConfig.from_folder(hf_folder)
    assert ours.model_type == arch
    for field in ("architecture", "hidden_size", "intermediate_size", "num_layers", "num_heads",
                  "num_kv_heads", "head_dim", "vocab_size", "rope", "tie_word_embeddings",
                  "qkv_bias", "o_bias", "sliding_windows"):
        assert getattr(ours, field) == getattr(ref, field), field
    assert ours.rms_norm_eps == pytest.approx(ref.rms_norm_eps, rel=1e-7)  # GGUF stores f32


def test_the_converted_tokenizer_encodes_as_transformers_gguf_tokenizer(converted):
    path, folder, _ = converted
    ours = AutoTokenizer.from_pretrained(folder)
    ref = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    for text in [*PROMPTS, '{"a": [1, 22, 333]}\n\tend <|im_end|>']:
        assert ours(text).input_ids == ref(text).input_ids, text


def test_prefill_logits_match_transformers(converted, hf_folder):
    _, folder, hf = converted
    runner = ModelRunner(folder, RunnerConfig(page_size=16, max_total_tokens=512))
    tok = AutoTokenizer.from_pretrained(hf_folder)
    prompts = [tok(p).input_ids for p in PROMPTS]
    assert_prefill_matches_hf(runner, hf, prompts, REL_TOL, min_std=0.01)


def test_greedy_tokens_match_transformers(converted, hf_folder):
    _, folder, hf = converted
    runner = ModelRunner(folder, RunnerConfig(page_size=1, max_total_tokens=512))
    tok = AutoTokenizer.from_pretrained(hf_folder)
    prompts = [tok(p).input_ids for p in PROMPTS]
    eos = list(runner.model_config.eos_token_ids)
    ours = greedy_generate(runner, prompts, NEW_TOKENS, stop_token_ids=eos)
    for ids, out in zip(prompts, ours):
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                          eos_token_id=eos, attention_mask=torch.ones(1, len(ids),
                                                                      dtype=torch.long))
        assert out == ref[0, len(ids):].tolist()
