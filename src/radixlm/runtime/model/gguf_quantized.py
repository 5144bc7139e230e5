"""A GGUF's 4-bit weights kept on their own bits: Q4_0 and Q4_1 blocks as int4 groups of 32.

No longer on the runner's path: ``--quantization gguf`` now runs every block type on the
file's mapped bytes (``gguf_weights.py``, ``kernels/cpu/gguf_blocks.py``). These decoders
(copies of the codes into torch's int4 / the grouped int8 layout) remain for their tests and
as the exact Q4 -> int4 mapping, should the int4 VNNI kernels be wanted for such files again.

A Q4_1 block of 32 weights stores float16 ``d`` and ``m`` and 4-bit codes ``q`` in [0, 15]:
``w = d * q + m``. In torch's int4 convention ``w = (q - 8) * scale + zero`` that is
``scale = d``, ``zero = m + 8 d`` (``m + 8d`` rounded once to float32). Q4_0 stores ``d`` only:
``w = d * (q - 8)``, so ``zero = 0``. Both map without requantizing.

Q8_0 (int8 codes with a scale per 32) does not fit torch's int8 kernel, which takes one scale
per output channel. A Q8_0 LM head (llama.cpp files keep ``output.weight`` at 8 bits) is kept
on its codes as two int4 planes (``kernels/cpu/int8_grouped.py``: exact dequantization, the
int4 kernel's bfloat16 roundings at run time); other Q8_0 projections stay dequantized
(float32, exact); ``--quantization int8`` requantizes every float weight per channel instead
(lossy). K-quants and Q5_* are dequantized too. Block layout: ``d`` (f16), [``m`` (f16)], 16
bytes whose low nibbles are elements 0-15 and high nibbles elements 16-31; Q8_0: ``d`` (f16)
and 32 int8 codes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ...kernels.cpu.int8_grouped import Int8GroupedWeight
from ...kernels.cpu.quant_linear import Int4Weight
from .gguf_checkpoint import GGUFCheckpoint, hf_tensor_name, unpermute_qk
from .gguf_conversion import gguf_source  # noqa: F401 - where callers looked for it
from .gguf_weights import FUSED_PROJECTIONS as _FUSED

EXACT_INT4_TYPES = {"Q4_0": 18, "Q4_1": 20}  # GGUF type -> bytes per block of 32
Q8_0_BLOCK_BYTES = 34  # f16 d + 32 int8 codes
GGUF_GROUP = 32


@dataclass(frozen=True)
class GGUFInt4Codes:
    """One tensor's codes uint8 ``[rows, K]`` and float32 scales/zeros ``[rows, K / 32]``."""

    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor


def decode_int4_blocks(raw: np.ndarray, type_name: str, rows: int, cols: int) -> GGUFInt4Codes:
    """Unpack Q4_0/Q4_1 ``raw`` bytes (``[rows, row_bytes]``) into codes, scales and zeros."""
    block = EXACT_INT4_TYPES[type_name]
    b = np.ascontiguousarray(raw).reshape(rows, cols // GGUF_GROUP, block)
    d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    if type_name == "Q4_1":
        m = b[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
        qs = b[..., 4:]
        zeros = m + np.float32(8.0) * d
    else:
        qs = b[..., 2:]
        zeros = np.zeros_like(d)
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).reshape(rows, cols)
    return GGUFInt4Codes(torch.from_numpy(codes.astype(np.uint8)), torch.from_numpy(d),
                         torch.from_numpy(zeros))


def decode_q8_0_blocks(raw: np.ndarray, rows: int, cols: int) -> Int8GroupedWeight:
    """Unpack Q8_0 ``raw`` bytes (``[rows, row_bytes]``) into int8 codes and their scales."""
    b = np.ascontiguousarray(raw).reshape(rows, cols // GGUF_GROUP, Q8_0_BLOCK_BYTES)
    d = b[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = b[..., 2:].copy().view(np.int8).reshape(rows, cols)
    return Int8GroupedWeight.build(torch.from_numpy(codes), torch.from_numpy(d), GGUF_GROUP)


@dataclass(frozen=True)
class GGUFQuantizedWeights:
    """Our fused linears (``layers.3.mlp.gate_up_proj``, ``lm_head``) kept as int4, and the
    quantized GGUF projection tensors that run dequantized instead, with their types."""

    int4: dict[str, Int4Weight]
    dequantized: dict[str, str]
    int8: dict[str, Int8GroupedWeight]  # a Q8_0 ``lm_head``

    @property
    def kept(self) -> dict[str, Int4Weight | Int8GroupedWeight]:
        """Every linear that runs on the file's own codes, by our name."""
        return {**self.int4, **self.int8}


def load_gguf_int4(path: str | Path) -> GGUFQuantizedWeights:
    """Every projection whose GGUF pieces are all Q4_0/Q4_1, as an :class:`Int4Weight`, and a
    Q8_0 LM head as an :class:`Int8GroupedWeight`."""
    ckpt = GGUFCheckpoint(path)
    cfg = ckpt.hf_config()
    heads = ckpt.permuted_heads(cfg)
    pieces: dict[str, GGUFInt4Codes] = {}
    dequantized: dict[str, str] = {}
    int8: dict[str, Int8GroupedWeight] = {}
    projections = {p for parts in _FUSED.values() for p in parts}
    for t in ckpt.raw_tensors:
        key = _linear_key(hf_tensor_name(t.name), projections, cfg["tie_word_embeddings"])
        if key is None:
            continue
        type_name = t.type_name
        if key == "lm_head" and type_name == "Q8_0":
            rows, cols = (int(d) for d in reversed(t.shape))
            int8[key] = decode_q8_0_blocks(t.data, rows, cols)
            continue
        if type_name not in EXACT_INT4_TYPES:
            if type_name not in ("F32", "F16", "BF16"):  # float types are not "dequantized"
                dequantized[t.name] = type_name
            continue
        rows, cols = (int(d) for d in reversed(t.shape))
        codes = decode_int4_blocks(t.data, type_name, rows, cols)
        for proj, n_heads in heads.items():
            if key.endswith(proj):
                codes = GGUFInt4Codes(*(unpermute_qk(c, n_heads) for c in
                                        (codes.codes, codes.scales, codes.zeros)))
        pieces[key] = codes
    return GGUFQuantizedWeights(_fuse(pieces, cfg["num_hidden_layers"]), dequantized, int8)


def _linear_key(name: str | None, projections: set[str], tied: bool) -> str | None:
    """``layers.3.mlp.up_proj`` / ``lm_head`` for a projection weight, else None."""
    if name == "model.embed_tokens.weight":
        return "lm_head" if tied else None
    if name == "lm_head.weight":
        return "lm_head"
    if name is None or not name.endswith(".weight"):
        return None
    key = name.removeprefix("model.").removesuffix(".weight")
    return key if key.split(".", 2)[-1] in projections else None


def _fuse(pieces: dict[str, GGUFInt4Codes], num_layers: int) -> dict[str, Int4Weight]:
    out: dict[str, Int4Weight] = {}
    for i in range(num_layers):
        for fused, parts in _FUSED.items():
            got = [pieces.get(f"layers.{i}.{p}") for p in parts]
            if any(g is None for g in got):
                continue  # some piece is not Q4_*: the fused linear stays float
            cat = [torch.cat([getattr(g, f) for g in got]) for f in ("codes", "scales", "zeros")]
            out[f"layers.{i}.{fused}"] = Int4Weight.build(*cat, GGUF_GROUP)
    if "lm_head" in pieces:
        p = pieces["lm_head"]
        out["lm_head"] = Int4Weight.build(p.codes, p.scales, p.zeros, GGUF_GROUP)
    return out
