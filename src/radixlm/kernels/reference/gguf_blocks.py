"""GGUF's quantized block types decoded from their raw bytes: the torch reference.

A GGUF matrix of ``rows`` output features by ``cols`` inputs is stored row by row, each row a
run of blocks of ``block_elems`` weights in ``block_bytes`` bytes (:data:`GGUF_BLOCKS`), so its
raw bytes are uint8 ``[rows, row_bytes]`` with ``row_bytes = cols / block_elems * block_bytes``.
Every type here decodes to ``w = (A * sc) * q - (B * mn)`` per element, with per block float16
``A``, ``B`` and small integer codes ``q`` and per sub-block integer ``sc``, ``mn``:

* ``Q4_0``: ``d`` f16, 16 bytes of nibbles (low: elements 0-15, high: 16-31); ``w = d (q - 8)``;
* ``Q4_1``: ``d``, ``m`` f16, the same nibbles; ``w = d q + m``;
* ``Q5_0``: ``d``, a 32-bit ``qh`` (bit i: element i's fifth bit), the nibbles; ``w = d (q - 16)``;
* ``Q8_0``: ``d``, 32 int8 codes; ``w = d q``;
* ``Q4_K`` (256): ``d``, ``dmin`` f16, 12 bytes of 6-bit scales and mins for 8 sub-blocks of 32,
  128 bytes of nibbles (byte run j of 32: low nibbles sub-block 2j, high 2j + 1);
  ``w = (d sc_j) q - (dmin m_j)``;
* ``Q5_K`` (256): as Q4_K with ``qh[32]`` before the nibbles (bit j of ``qh[i]``: element i of
  sub-block j's fifth bit);
* ``Q6_K`` (256): ``ql[128]`` (low nibbles), ``qh[64]`` (2 high bits), int8 ``scales[16]`` (one per
  16), then ``d``; ``w = (d sc_s) (q - 32)``.

The float32 operations follow ``gguf.quants.dequantize``'s order, so the result is bit-equal
to it (tests/kernels/reference/test_gguf_blocks_reference.py). Imports torch only.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class BlockGeometry:
    """One GGUF block type: ``elems`` weights in ``nbytes`` bytes."""

    elems: int
    nbytes: int


QK_K = 256  # a K-quant super-block
GGUF_BLOCKS: dict[str, BlockGeometry] = {
    "Q4_0": BlockGeometry(32, 2 + 16),
    "Q4_1": BlockGeometry(32, 2 + 2 + 16),
    "Q5_0": BlockGeometry(32, 2 + 4 + 16),
    "Q8_0": BlockGeometry(32, 2 + 32),
    "Q4_K": BlockGeometry(QK_K, 2 + 2 + 12 + QK_K // 2),
    "Q5_K": BlockGeometry(QK_K, 2 + 2 + 12 + QK_K // 8 + QK_K // 2),
    "Q6_K": BlockGeometry(QK_K, QK_K // 2 + QK_K // 4 + QK_K // 16 + 2),
}


def gguf_block_geometry(type_name: str) -> BlockGeometry:
    """The geometry of ``type_name``, or a ValueError listing the supported types."""
    try:
        return GGUF_BLOCKS[type_name]
    except KeyError:
        raise ValueError(f"GGUF block type {type_name!r} unsupported; "
                         f"supported: {', '.join(GGUF_BLOCKS)}") from None


def gguf_row_bytes(type_name: str, cols: int) -> int:
    """Bytes of one row of ``cols`` weights (``cols`` a multiple of the block size)."""
    geo = gguf_block_geometry(type_name)
    if cols < 1 or cols % geo.elems:
        raise ValueError(f"{type_name}: cols must be a positive multiple of {geo.elems}, "
                         f"got {cols}")
    return cols // geo.elems * geo.nbytes


def check_raw(raw: torch.Tensor, type_name: str, cols: int) -> None:
    """Raise unless ``raw`` is uint8 ``[rows, row_bytes]`` for ``cols`` inputs of ``type_name``."""
    row_bytes = gguf_row_bytes(type_name, cols)
    if not isinstance(raw, torch.Tensor) or raw.dtype != torch.uint8 or raw.ndim != 2:
        raise TypeError(f"raw: expected a uint8 [rows, row_bytes] tensor, got "
                        f"{getattr(raw, 'dtype', type(raw).__name__)} "
                        f"{tuple(getattr(raw, 'shape', ()))}")
    if raw.shape[1] != row_bytes or raw.shape[0] < 1:
        raise ValueError(f"raw: {type_name} with {cols} columns needs [rows >= 1, {row_bytes}] "
                         f"bytes, got {tuple(raw.shape)}")


def _half(b: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., 2]`` little-endian float16 bytes -> float32 ``[..., 1]``."""
    return b.contiguous().view(torch.float16).to(torch.float32)


def _nibbles(qs: torch.Tensor) -> torch.Tensor:
    """uint8 ``[..., n]`` -> int32 ``[..., 2n]``: the low nibbles, then the high ones."""
    q = qs.to(torch.int32)
    return torch.cat([q & 15, q >> 4], dim=-1)


def _bits(b: torch.Tensor, count: int) -> torch.Tensor:
    """uint8 ``[..., n]`` -> int32 ``[..., n, count]``: bit j of each byte at ``[..., j]``."""
    shifts = torch.arange(count, dtype=torch.int32)
    return (b.to(torch.int32)[..., None] >> shifts) & 1


def _scale_min_k4(s: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Q4_K/Q5_K's 12 scale bytes ``[B, 12]`` -> 6-bit scales and mins, int32 ``[B, 8]``.

    Sub-blocks 0-3 keep the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); 4-7 take their
    low 4 bits from byte 8 + j's nibbles and the top 2 from bytes 0-3's (scales) and 4-7's
    (mins) top bits."""
    s = s.to(torch.int32)
    lo, mid, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
    sc = torch.cat([lo & 63, (hi & 15) | ((lo >> 6) << 4)], dim=1)
    mn = torch.cat([mid & 63, (hi >> 4) | ((mid >> 6) << 4)], dim=1)
    return sc, mn


def _q32(b: torch.Tensor, type_name: str) -> torch.Tensor:
    """Blocks of 32 ``[B, nbytes]`` -> float32 ``[B, 32]``."""
    d = _half(b[:, 0:2])
    if type_name == "Q8_0":
        return b[:, 2:34].contiguous().view(torch.int8).to(torch.float32) * d
    if type_name == "Q4_1":
        return d * _nibbles(b[:, 4:20]).to(torch.float32) + _half(b[:, 2:4])
    if type_name == "Q4_0":
        return d * (_nibbles(b[:, 2:18]) - 8).to(torch.float32)
    qh = _bits(b[:, 2:6], 8).reshape(-1, 32)  # Q5_0: bit i of the little-endian u32
    return d * ((_nibbles(b[:, 6:22]) | (qh << 4)) - 16).to(torch.float32)


def _qk(b: torch.Tensor, type_name: str) -> torch.Tensor:
    """Q4_K/Q5_K super-blocks ``[B, nbytes]`` -> float32 ``[B, 256]``."""
    n = b.shape[0]
    d, dmin = _half(b[:, 0:2]), _half(b[:, 2:4])
    sc, mn = _scale_min_k4(b[:, 4:16])
    qs = b[:, -128:].reshape(n, 4, 32)
    q = _nibbles(qs).reshape(n, 8, 32)  # run j: sub-blocks 2j (low), 2j + 1 (high)
    if type_name == "Q5_K":
        high = _bits(b[:, 16:48], 8)  # [B, 32 elements, 8 sub-blocks]
        q = q | (high.transpose(1, 2) << 4)
    scale = (d * sc.to(torch.float32))[..., None]
    offset = (dmin * mn.to(torch.float32))[..., None]
    return (scale * q.to(torch.float32) - offset).reshape(n, QK_K)


def _q6k(b: torch.Tensor) -> torch.Tensor:
    """Q6_K super-blocks ``[B, 210]`` -> float32 ``[B, 256]``.

    Element 32 t + i, t = 4 h + u: low nibble (u < 2) or high (u >= 2) of ql[64 h + 32 (u % 2)
    + i], bits 2u, 2u + 1 of qh[32 h + i]."""
    n = b.shape[0]
    ql = _nibbles(b[:, 0:128].reshape(n, 2, 64)).reshape(n, 2, 4, 32)  # [B, h, u, i]
    qh = b[:, 128:192].reshape(n, 2, 1, 32).to(torch.int32)
    qh = (qh >> (2 * torch.arange(4, dtype=torch.int32)).view(1, 1, 4, 1)) & 3
    q = ((ql | (qh << 4)) - 32).reshape(n, 16, 16)
    scales = b[:, 192:208].contiguous().view(torch.int8).to(torch.float32)
    d = _half(b[:, 208:210])
    return ((d * scales)[..., None] * q.to(torch.float32)).reshape(n, QK_K)


# byte offsets of each type's float16 fields in a block (the rest are codes and small scales)
_HALF_FIELDS = {"Q4_0": (0,), "Q4_1": (0, 2), "Q5_0": (0,), "Q8_0": (0,), "Q4_K": (0, 2),
                "Q5_K": (0, 2), "Q6_K": (208,)}


def random_gguf_raw(type_name: str, rows: int, cols: int, gen: torch.Generator,
                    scale: float = 0.01) -> torch.Tensor:
    """Random blocks uint8 ``[rows, row_bytes]`` of ``type_name``: random code and scale bytes,
    float16 fields ``|N(0, 1)| * scale`` (a Q4_1 ``m`` signed), as a quantizer would write."""
    geo = gguf_block_geometry(type_name)
    blocks = rows * (gguf_row_bytes(type_name, cols) // geo.nbytes)
    raw = torch.randint(0, 256, (blocks, geo.nbytes), dtype=torch.uint8, generator=gen)
    for at in _HALF_FIELDS[type_name]:
        value = torch.randn(blocks, 1, generator=gen) * scale
        if not (type_name == "Q4_1" and at == 2):
            value = value.abs()
        raw[:, at:at + 2] = value.to(torch.float16).view(torch.uint8)
    return raw.reshape(rows, -1)


def gguf_dequantize(raw: torch.Tensor, type_name: str, cols: int) -> torch.Tensor:
    """uint8 ``[rows, row_bytes]`` GGUF blocks -> float32 ``[rows, cols]`` (bit-equal to
    ``gguf.quants.dequantize``)."""
    check_raw(raw, type_name, cols)
    geo = GGUF_BLOCKS[type_name]
    rows = raw.shape[0]
    blocks = raw.reshape(rows * (cols // geo.elems), geo.nbytes)
    if geo.elems == 32:
        w = _q32(blocks, type_name)
    elif type_name == "Q6_K":
        w = _q6k(blocks)
    else:
        w = _qk(blocks, type_name)
    return w.reshape(rows, cols)


def gguf_linear_ref(x: torch.Tensor, raw: torch.Tensor, type_name: str,
                    cols: int) -> torch.Tensor:
    """``x @ W.T`` in float32: x ``[T, cols]``, W the dequantized ``raw`` -> ``[T, rows]``."""
    return x.to(torch.float32) @ gguf_dequantize(raw, type_name, cols).T
