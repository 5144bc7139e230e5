"""Reading a GGUF checkpoint (llama.cpp's single-file format): Llama, Qwen2, Qwen3, Phi-3,
Gemma 3.

:class:`GGUFCheckpoint` validates a file up front (readable, not truncated, a supported
architecture, every tensor of a type we can dequantize, tokenizer metadata present) and then
exposes it in our terms: :meth:`hf_config` is a Hugging Face ``config.json`` dict (which
:meth:`ModelConfig.from_dict` validates), and :meth:`iter_weights` yields float32 tensors under
Hugging Face names (``gguf_dequantize.py``). The header is read by our own parser
(:mod:`radixlm.fsm.tokens.gguf_header`: ~0.2-0.5 s where ``gguf.GGUFReader`` took 15-30 s);
the ``gguf`` package is not imported on this path.

For ``llama`` files, llama.cpp's converter permutes the rows of ``q_proj`` and ``k_proj`` from
Hugging Face's rotate-half RoPE layout to GGML's interleaved one; :func:`unpermute_qk` undoes
that, so the tensors feed our (Hugging Face layout) attention unchanged. ``qwen2`` and ``qwen3``
files are written unpermuted (llama.cpp runs them with NEOX-style, i.e. rotate-half, RoPE).
Each architecture's differences (tensor names, norms stored as ``1 + w``, extra config keys)
are in ``gguf_families.py``; Phi-3's (fused tensors, partial rotary, longrope factors) in
``gguf_phi3.py``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...fsm.tokens.gguf_header import (
    GGUFHeader,
    GGUFHeaderError,
    GGUFTensorInfo,
    read_gguf_header,
)
from .gguf_dequantize import dequantize_tensor
from .gguf_families import GGUF_FAMILIES
from .model_config import UnsupportedModelError

# GGUF ``general.architecture`` -> the Hugging Face architecture it is served as.
SUPPORTED_GGUF_ARCHITECTURES = {a: f.hf_architecture for a, f in GGUF_FAMILIES.items()}
# Architectures whose q/k rows llama.cpp's convert_hf_to_gguf.py permuted (LlamaModel only;
# Qwen2Model, Qwen3Model and Gemma3Model write Hugging Face's rotate-half layout as is).
PERMUTED_QK_ARCHITECTURES = frozenset(a for a, f in GGUF_FAMILIES.items() if f.permuted_qk)
# Tensor types the gguf package dequantizes and we accept (names as GGMLQuantizationType).
SUPPORTED_TENSOR_TYPES = (
    "F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0",
    "Q2_K", "Q3_K", "Q4_K", "Q5_K", "Q6_K",
)
_LAYER_TENSORS = {
    "attn_norm": "input_layernorm",
    "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj",
    "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj",
    "attn_q_norm": "self_attn.q_norm",
    "attn_k_norm": "self_attn.k_norm",
    "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_GLOBAL_TENSORS = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
}
_LAYER_RE = re.compile(r"blk\.(\d+)\.(\w+)\.(weight|bias)")


def hf_tensor_name(gguf_name: str, architecture: str = "llama") -> str | None:
    """The Hugging Face name of a GGUF tensor of ``architecture``, or None for tensors we do
    not load."""
    if gguf_name in _GLOBAL_TENSORS:
        return _GLOBAL_TENSORS[gguf_name]
    m = _LAYER_RE.fullmatch(gguf_name)
    family = GGUF_FAMILIES.get(architecture)
    table = {**_LAYER_TENSORS, **(family.layer_tensors if family else {})}
    if m is None or m.group(2) not in table:
        return None
    return f"model.layers.{m.group(1)}.{table[m.group(2)]}.{m.group(3)}"


def unpermute_qk(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Invert llama.cpp's q/k row permutation.

    The converter maps each head's rows ``[half0 | half1]`` (rotate-half pairs ``i`` and
    ``i + d/2``) to interleaved ``[h0_0, h1_0, h0_1, h1_1, ...]``: it reshapes rows to
    ``[heads, 2, d/2]`` and swaps the last two axes. Here: ``[heads, d/2, 2] -> [heads, 2, d/2]``.
    """
    rows = w.shape[0]
    head_dim = rows // n_heads
    return (w.reshape(n_heads, head_dim // 2, 2, *w.shape[1:]).transpose(1, 2)
            .reshape(w.shape).contiguous())


class GGUFCheckpoint:
    """A validated GGUF file; raises :class:`UnsupportedModelError` naming what is wrong."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._header = _open_header(self.path)
        self.architecture = self._string("general.architecture")
        if self.architecture not in SUPPORTED_GGUF_ARCHITECTURES:
            raise UnsupportedModelError(
                f"{self.path}: GGUF architecture {self.architecture!r} is not supported; "
                f"radixlm loads GGUF architectures {sorted(SUPPORTED_GGUF_ARCHITECTURES)} "
                f"(other models: pass a Hugging Face safetensors folder)")
        self.family = GGUF_FAMILIES[self.architecture]
        self._check_tensors()

    # -- metadata ---------------------------------------------------------------------------
    def field(self, key: str, default: Any = None) -> Any:
        """A metadata value (scalar, string or list), or ``default`` when absent."""
        return self._header.value(key, default)

    def _string(self, key: str) -> str:
        value = self.field(key)
        if value is None:
            raise UnsupportedModelError(f"{self.path}: GGUF metadata {key!r} is missing")
        return str(value)

    def _arch(self, key: str, default: Any = None) -> Any:
        value = self.field(f"{self.architecture}.{key}", default)
        if value is None:
            raise UnsupportedModelError(
                f"{self.path}: GGUF metadata {self.architecture}.{key!r} is missing")
        return value

    def has_tokenizer(self) -> bool:
        return (self.field("tokenizer.ggml.model") is not None
                and "tokenizer.ggml.tokens" in self._header.fields)

    def require_tokenizer(self) -> None:
        if not self.has_tokenizer():
            raise UnsupportedModelError(
                f"{self.path}: the GGUF has no tokenizer metadata (tokenizer.ggml.model and "
                f"tokenizer.ggml.tokens are required to build the tokenizer); use a GGUF "
                f"converted with its tokenizer, or pass --tokenizer-path to a Hugging Face "
                f"tokenizer folder")

    @property
    def chat_template(self) -> str | None:
        value = self.field("tokenizer.chat_template")
        return None if value is None else str(value)

    def hf_config(self) -> dict[str, Any]:
        """The checkpoint's architecture as a Hugging Face ``config.json`` dict."""
        heads = int(self._arch("attention.head_count"))
        hidden = int(self._arch("embedding_length"))
        # key_length: Qwen3's explicit head_dim (llama.cpp writes it from config's head_dim).
        head_dim = int(self._arch("attention.key_length",
                                  self._arch("rope.dimension_count", hidden // heads)))
        names = {t.name for t in self._header.tensors}
        cfg: dict[str, Any] = {
            "architectures": [SUPPORTED_GGUF_ARCHITECTURES[self.architecture]],
            "model_type": self.family.model_type,
            "hidden_size": hidden,
            "intermediate_size": int(self._arch("feed_forward_length")),
            "num_hidden_layers": int(self._arch("block_count")),
            "num_attention_heads": heads,
            "num_key_value_heads": int(self._arch("attention.head_count_kv", heads)),
            "head_dim": head_dim,
            "vocab_size": self._vocab_size(),
            "rms_norm_eps": float(self._arch("attention.layer_norm_rms_epsilon")),
            "max_position_embeddings": int(self._arch("context_length")),
            "rope_theta": float(self._arch("rope.freq_base", 10000.0)),
            "tie_word_embeddings": "output.weight" not in names,
            "torch_dtype": "float32",
        }
        scaling = self.field(f"{self.architecture}.rope.scaling.type")
        if scaling not in (None, "none"):
            cfg["rope_scaling"] = {
                "rope_type": str(scaling),
                "factor": float(self._arch("rope.scaling.factor", 1.0)),
            }
        if "rope_freqs.weight" in names:
            cfg["rope_freq_factors"] = self._vector("rope_freqs.weight")
        window = int(self.field(f"{self.architecture}.attention.sliding_window", 0))
        if window > 0:  # 0: none (Phi3MiniModel writes it always)
            cfg["sliding_window"] = window
        for key, hf_key in (("eos_token_id", "eos_token_id"), ("bos_token_id", "bos_token_id")):
            value = self.field(f"tokenizer.ggml.{key}")
            if value is not None:
                cfg[hf_key] = int(value)
        if self.family.config is not None:
            cfg.update(self.family.config(
                lambda key, default: self.field(f"{self.architecture}.{key}", default),
                lambda name: self._vector(name) if name in names else None, cfg))
        return cfg

    def _vector(self, name: str) -> list[float]:
        """A 1-D tensor's values. ``rope_freqs.weight`` holds one divisor per rotary frequency:
        llama.cpp's converter's precomputation of Llama 3.x's ``llama3`` rope scaling
        (``inv_freq / factor``), served as stored (its parameters are not in the metadata)."""
        return [float(f) for f in dequantize_tensor(self._tensor(name)).reshape(-1)]

    def _vocab_size(self) -> int:
        value = self.field(f"{self.architecture}.vocab_size")
        if value is not None:
            return int(value)
        embd = self._tensor("token_embd.weight")
        return int(embd.shape[-1])  # GGUF shapes are innermost-first: [hidden, vocab]

    @property
    def qk_permuted(self) -> bool:
        """Whether llama.cpp stored this file's q/k rows in GGML's interleaved RoPE order."""
        return self.architecture in PERMUTED_QK_ARCHITECTURES

    def permuted_heads(self, cfg: dict[str, Any]) -> dict[str, int]:
        """``{"self_attn.q_proj": heads, "self_attn.k_proj": kv_heads}`` for the projections
        to un-permute, empty when the file is in Hugging Face's layout already."""
        if not self.qk_permuted:
            return {}
        return {"self_attn.q_proj": cfg["num_attention_heads"],
                "self_attn.k_proj": cfg["num_key_value_heads"]}

    # -- tensors ----------------------------------------------------------------------------
    def _tensor(self, name: str) -> GGUFTensorInfo:
        t = self._header.tensor(name)
        if t is None:
            raise UnsupportedModelError(f"{self.path}: tensor {name!r} is missing")
        return t

    def _check_tensors(self) -> None:
        # the header checked that every tensor's bytes lie inside the file
        for t in self._header.tensors:
            if t.type_name not in SUPPORTED_TENSOR_TYPES:
                raise UnsupportedModelError(
                    f"{self.path}: tensor {t.name!r} has GGUF type {t.type_name}, which "
                    f"radixlm cannot dequantize; supported types: "
                    f"{', '.join(SUPPORTED_TENSOR_TYPES)}")

    @property
    def raw_tensors(self) -> list[GGUFTensorInfo]:
        """The tensors' infos (name, ``type_name``, GGUF ``shape``, ``data``: a view of the
        file's map, raw bytes ``[rows, row_bytes]`` for block types)."""
        return list(self._header.tensors)

    @property
    def num_tensors(self) -> int:
        return len(self._header.tensors)

    def iter_weights(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Yield ``(hf_name, float32 tensor)`` in file order, q/k rows un-permuted (for
        :attr:`qk_permuted` architectures) and RMSNorm weights as Hugging Face stores them
        (``w``, where the file holds ``1 + w``)."""
        cfg = self.hf_config()
        n_heads = self.permuted_heads(cfg)
        for t in self._header.tensors:
            name = hf_tensor_name(t.name, self.architecture)
            if name is None:
                continue
            # numpy order is outermost-first (the reverse of GGUF's ne order): [out, in]
            w = torch.from_numpy(np.array(dequantize_tensor(t), dtype=np.float32))
            for proj, heads in n_heads.items():
                if f".{proj}." in name:
                    w = unpermute_qk(w, heads)
            if self.family.norms_plus_one and name.endswith("norm.weight"):
                w -= 1.0  # as transformers' GGUF loader does; the model adds 1 back
            yield name, w


def _open_header(path: Path) -> GGUFHeader:
    if not path.is_file():
        raise UnsupportedModelError(f"GGUF file {str(path)!r} does not exist")
    try:
        return read_gguf_header(path)
    except GGUFHeaderError as exc:  # names the file, the byte and the problem
        raise UnsupportedModelError(f"not a readable GGUF file: {exc}") from exc
