"""GGUF files of real model shapes with random weights, written the way llama.cpp writes them.

A size benchmark needs an 8B-shaped file, not an 8B model: random block bytes with sane scales
decode to weights of a plausible spread, so no quantizer is needed and a 4.6 GB file takes
seconds to write. :func:`write_random_gguf` writes one tensor at a time (memory stays at one
tensor, not the file), in Q4_K_M's type mix (:func:`q4_k_m_type`), with a real tokenizer's
metadata copied from another GGUF so llama.cpp loads the file too.

Block layouts (bytes; ``d``/``dmin``/``m`` are float16) and the scale each type gets here, so a
weight's spread is about ``WEIGHT_STD`` (the codes are uniform random bytes):

* Q4_0 (18): d, 16 bytes of nibbles; ``w = d (q - 8)``.
* Q4_1 (20): d, m, 16 bytes of nibbles; ``w = d q + m``.
* Q8_0 (34): d, 32 int8; ``w = d c``.
* Q5_0 (22): d, qh[4], qs[16]; ``w = d (q - 16)``.
* Q4_K (144): d, dmin, 12 bytes of 6-bit scales/mins, qs[128]; ``w = d sc q - dmin m``.
* Q5_K (176): d, dmin, scales[12], qh[32], qs[128]; as Q4_K with 5-bit q.
* Q6_K (210): ql[128], qh[64], int8 scales[16], d; ``w = d sc (q - 32)``.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

WEIGHT_STD = 0.02
# type -> (byte offsets of float16 fields, each field's value): the value makes the decoded
# weights' spread about WEIGHT_STD given uniform random codes (see the module docstring).
_SCALES: dict[str, tuple[tuple[int, float], ...]] = {
    "Q4_0": ((0, 4.3e-3),),
    "Q4_1": ((0, 4.3e-3), (2, -3.2e-2)),  # m = -7.5 d centres w = d q + m
    "Q8_0": ((0, 2.7e-4),),
    "Q5_0": ((0, 2.2e-3),),
    "Q4_K": ((0, 0.8e-4), (2, 6.0e-4)),
    "Q5_K": ((0, 5.5e-5), (2, 8.0e-4)),
    "Q6_K": ((208, 1.5e-5),),
}


@dataclass(frozen=True)
class ModelShape:
    """A decoder's shape as its GGUF metadata states it."""

    name: str
    arch: str  # "llama" or "qwen3" (QK-norm, explicit head_dim)
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    ffn: int
    context: int = 8192
    rope_base: float = 500000.0

    def __post_init__(self) -> None:
        if self.arch not in ("llama", "qwen3"):
            raise ValueError(f"arch must be llama or qwen3, got {self.arch!r}")
        if self.heads % self.kv_heads or min(self.hidden, self.layers, self.ffn) <= 0:
            raise ValueError(f"inconsistent shape: {self}")


# Llama 3.2 1B / 3B and Llama 3.1 8B; Qwen3 1.7B and 8B (their config.json values).
SHAPES = {
    "llama-1b": ModelShape("llama-1b", "llama", 2048, 16, 32, 8, 64, 8192),
    "llama-3b": ModelShape("llama-3b", "llama", 3072, 28, 24, 8, 128, 8192),
    "llama-8b": ModelShape("llama-8b", "llama", 4096, 32, 32, 8, 128, 14336),
    "qwen3-1.7b": ModelShape("qwen3-1.7b", "qwen3", 2048, 28, 16, 8, 128, 6144,
                             rope_base=1000000.0),
    "qwen3-8b": ModelShape("qwen3-8b", "qwen3", 4096, 36, 32, 8, 128, 12288,
                           rope_base=1000000.0),
}


def q4_k_m_type(kind: str, layer: int, layers: int) -> str:
    """The type llama.cpp's Q4_K_M gives a tensor: Q6_K for the output and for ``attn_v`` and
    ``ffn_down`` in the first and last eighth of the layers and every third one between (its
    "use more bits" rule), Q4_K elsewhere."""
    if kind == "output":
        return "Q6_K"
    if kind in ("attn_v", "ffn_down"):
        more = layer < layers // 8 or layer >= 7 * layers // 8 or (layer - layers // 8) % 3 == 2
        return "Q6_K" if more else "Q4_K"
    return "Q4_K"


def random_blocks(type_name: str, rows: int, cols: int, rng: np.random.Generator) -> np.ndarray:
    """Random ``[rows, row_bytes]`` uint8 blocks of ``type_name`` with the scales above."""
    import gguf

    qtype = gguf.GGMLQuantizationType[type_name]
    block, size = gguf.GGML_QUANT_SIZES[qtype]
    if cols % block:
        raise ValueError(f"{cols} columns are no whole number of {type_name} blocks ({block})")
    raw = rng.integers(0, 256, size=(rows, cols // block, size), dtype=np.uint8)
    for offset, value in _SCALES[type_name]:
        raw[..., offset:offset + 2] = np.frombuffer(np.float16(value).tobytes(), np.uint8)
    return raw.reshape(rows, -1)


def _tensors(shape: ModelShape, vocab: int) -> Iterator[tuple[str, tuple[int, int] | int, str]]:
    """``(name, numpy shape [out, in] or a norm's length, type)`` in llama.cpp's file order."""
    h, q, kv = shape.hidden, shape.heads * shape.head_dim, shape.kv_heads * shape.head_dim
    yield "token_embd.weight", (vocab, h), "Q4_K"
    for i in range(shape.layers):
        b = f"blk.{i}."
        yield b + "attn_norm.weight", h, "F32"
        yield b + "attn_q.weight", (q, h), q4_k_m_type("attn_q", i, shape.layers)
        yield b + "attn_k.weight", (kv, h), q4_k_m_type("attn_k", i, shape.layers)
        yield b + "attn_v.weight", (kv, h), q4_k_m_type("attn_v", i, shape.layers)
        if shape.arch == "qwen3":
            yield b + "attn_q_norm.weight", shape.head_dim, "F32"
            yield b + "attn_k_norm.weight", shape.head_dim, "F32"
        yield b + "attn_output.weight", (h, q), q4_k_m_type("attn_output", i, shape.layers)
        yield b + "ffn_norm.weight", h, "F32"
        yield b + "ffn_gate.weight", (shape.ffn, h), q4_k_m_type("ffn_gate", i, shape.layers)
        yield b + "ffn_up.weight", (shape.ffn, h), q4_k_m_type("ffn_up", i, shape.layers)
        yield b + "ffn_down.weight", (h, shape.ffn), q4_k_m_type("ffn_down", i, shape.layers)
    yield "output_norm.weight", h, "F32"
    yield "output.weight", (vocab, h), q4_k_m_type("output", 0, shape.layers)


def _copy_tokenizer(writer, source: Path) -> int:
    """Copy every ``tokenizer.*`` field of ``source`` into ``writer``; the vocabulary size."""
    import gguf

    reader = gguf.GGUFReader(str(source))
    vocab = 0
    for key, field in reader.fields.items():
        if not key.startswith("tokenizer."):
            continue
        value = field.contents()
        sub = field.types[1] if len(field.types) > 1 else None
        writer.add_key_value(key, value, field.types[0], sub)
        if key == "tokenizer.ggml.tokens":
            vocab = len(value)
    if not vocab:
        raise ValueError(f"{source} has no tokenizer.ggml.tokens to copy")
    return vocab


def write_random_gguf(shape: ModelShape, out: Path, tokenizer_gguf: Path, seed: int = 0) -> Path:
    """Write ``shape`` with random Q4_K_M-mix weights and ``tokenizer_gguf``'s tokenizer to
    ``out`` (its vocabulary sets the embedding rows); returns ``out``."""
    import gguf

    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(str(out), shape.arch)
    w.add_name(f"random {shape.name}")
    w.add_context_length(shape.context)
    w.add_embedding_length(shape.hidden)
    w.add_block_count(shape.layers)
    w.add_feed_forward_length(shape.ffn)
    w.add_head_count(shape.heads)
    w.add_head_count_kv(shape.kv_heads)
    w.add_key_length(shape.head_dim)
    w.add_value_length(shape.head_dim)
    w.add_rope_dimension_count(shape.head_dim)
    w.add_rope_freq_base(shape.rope_base)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    vocab = _copy_tokenizer(w, tokenizer_gguf)
    specs = list(_tensors(shape, vocab))
    for name, dims, type_name in specs:
        if type_name == "F32":
            w.add_tensor_info(name, (dims,), np.dtype(np.float32), dims * 4)
            continue
        qtype = gguf.GGMLQuantizationType[type_name]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        rows, cols = dims
        # a uint8 tensor's shape is given in bytes ([rows, row_bytes]); gguf turns it back
        w.add_tensor_info(name, (rows, cols // block * size), np.dtype(np.uint8),
                          rows * cols // block * size, raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for _name, dims, type_name in specs:
        if type_name == "F32":  # norms near one, as trained models have them
            w.write_tensor_data((1.0 + 0.1 * rng.standard_normal(dims)).astype(np.float32))
        else:
            w.write_tensor_data(random_blocks(type_name, *dims, rng))
    w.close()
    return out
