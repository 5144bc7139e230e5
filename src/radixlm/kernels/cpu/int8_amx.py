"""Per-channel int8 linear on AMX int8 tiles, float32-faithful activations: ``int8-amx``.

``y[m, n] = scale[n] * sum_k x[m, k] * codes[n, k]`` (``--quantization int8``), float32 out.
The kernel is ``gemm_codes`` of ``kernels/cpu/native/f32_amx_fx24_gemm.c``: each row of ``x`` as
24-bit fixed point in three s8 digit planes (as ``f32-amx-fx24`` writes it), times the codes
themselves with ``TDPBSSD`` (three tile products a block of 64 k, every digit level kept),
combined exactly in int64 and scaled once in double. The only approximation is ``x``'s
rounding to ~2^-23 of its row's largest value, so the result is the dequantized weight's
product within ``2^-22 max|x[m]| sum_k |w[n, k]|`` plus half an ulp; it equals
:func:`int8_amx_reference` (the same arithmetic in float64) bit for bit. Rows are
independent of the other rows of a call.

Where it pays: many rows. 1 byte a weight like ``int8-vnni``, but a tile product does 16 x
16 x 64 multiply-adds, so the arithmetic of a 32-row decode step or a prefill no longer
bounds it (``docs/kernels.md``). The load-time measurement picks it per row bucket.

Needs the built ``radixlm.kernels.cpu.native.f32_amx_fx24_gemm``, a CPU with AMX-INT8 and AVX-512
F/BW/DQ/VL and a Linux kernel that lets the process use AMX (:func:`int8_amx_available`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..reference.checks import check_tensor
from .f32_amx_fx24_gemm import (
    MAX_K,
    TILE_K,
    TILE_N,
    check_packed,
    digit_planes,
    fixed_rows,
    threaded,
    write_packed,
)
from .f32_linear import NativeF32Linear, checked_gemm
from .native import load, require, unavailable_reason
from .q4_gemv import PackArena
from .quant_linear import Int8Weight

_NATIVE = load("f32_amx_fx24_gemm")
_NEEDS = "AMX-INT8 and AVX-512 F/BW/DQ/VL (and a kernel that grants AMX state)"
_F32, _F64 = torch.float32, torch.float64
_CPU = torch.device("cpu")


def int8_amx_available() -> bool:
    """True if the native module is built and this CPU and kernel can run it."""
    return not unavailable_reason(_NATIVE, "f32_amx_fx24_gemm", _NEEDS)


def int8_amx_supports(weight: Int8Weight) -> bool:
    """True if the kernel is available and takes ``weight``'s shape (K at most
    :data:`MAX_K`)."""
    return int8_amx_available() and weight.shape[1] <= MAX_K


def _packed_bytes(out_features: int, in_features: int) -> tuple[int, int, int]:
    tiles, blocks = -(-out_features // TILE_N), -(-in_features // TILE_K)
    return tiles, blocks, tiles * blocks * TILE_K * TILE_N + 4 * tiles * TILE_N


@dataclass(frozen=True)
class Int8AmxWeight:
    """A per-channel int8 weight ``[N, K]`` as ``packed`` bytes: the codes int8
    ``[ceil(N / 16), ceil(K / 64), 16, 16, 4]`` (``[t, b, r, c, i]`` is
    ``codes[16t + c, 64b + 4r + i]``, zeros past ``N`` and ``K``) followed by each padded
    row's scale float32."""

    packed: torch.Tensor
    out_features: int
    in_features: int

    def __post_init__(self) -> None:
        check_packed(self.packed, self.out_features, self.in_features,
                     _packed_bytes(self.out_features, self.in_features)[2])

    @classmethod
    def pack(cls, weight: Int8Weight, arena: PackArena | None = None) -> Int8AmxWeight:
        """Lays out ``weight``'s codes and scales for the kernel (in ``arena`` if given)."""
        if not isinstance(weight, Int8Weight):
            raise TypeError(f"weight: expected an Int8Weight, got {type(weight).__name__}")
        n, k = weight.shape
        tiles, blocks, _ = _packed_bytes(n, k)
        codes = F.pad(weight.codes, (0, blocks * TILE_K - k, 0, tiles * TILE_N - n))
        units = codes.view(tiles, TILE_N, blocks, TILE_K // 4, 4).permute(0, 2, 3, 1, 4)
        scales = F.pad(weight.scales.to(_F32), (0, tiles * TILE_N - n), value=1.0)
        return cls(write_packed(units, scales, arena), n, k)

    def unpack(self) -> Int8Weight:
        """The codes and scales back (for the reference and tests)."""
        tiles, blocks, nbytes = _packed_bytes(self.out_features, self.in_features)
        split = nbytes - 4 * tiles * TILE_N
        units = self.packed[:split].view(torch.int8).view(tiles, blocks, TILE_K // 4,
                                                           TILE_N, 4)
        codes = units.permute(0, 3, 1, 2, 4).reshape(tiles * TILE_N, blocks * TILE_K)
        n, k = self.out_features, self.in_features
        scales = self.packed[split:].view(_F32)[:n].clone()
        return Int8Weight(codes[:n, :k].contiguous(), scales)


def int8_amx_gemm(x: torch.Tensor, weight: Int8AmxWeight) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` (contiguous, CPU) times the dequantized weight transposed:
    float32 ``[M, N]``; anything else raises before the kernel runs."""
    native = require(_NATIVE, "f32_amx_fx24_gemm", _NEEDS)
    return checked_gemm(native.gemm_codes, x, weight.packed, weight.out_features,
                        weight.in_features)


class Int8AmxLinear(NativeF32Linear):
    """``x @ weight.dequantize().T`` on the kernel: ``[M, K] -> [M, N]`` in ``x``'s dtype
    (computed in float32: another float dtype is converted in and out)."""

    __slots__ = ()

    def __init__(self, weight: Int8Weight | Int8AmxWeight,
                 arena: PackArena | None = None) -> None:
        native = require(_NATIVE, "f32_amx_fx24_gemm", _NEEDS)
        packed = weight if isinstance(weight, Int8AmxWeight) else Int8AmxWeight.pack(weight,
                                                                                    arena)
        gemm = threaded(native.gemm_codes)

        def checked(x: torch.Tensor) -> torch.Tensor:
            """Off the fast path (a float32 x goes straight to the kernel): another float
            dtype is converted in and out, anything else refused by the checks."""
            if x.is_floating_point() and x.dtype != _F32:
                return checked(x.to(_F32)).to(x.dtype)
            return checked_gemm(gemm, x, packed.packed, packed.out_features,
                                packed.in_features)
        super().__init__(packed, packed.packed, packed.out_features, packed.in_features,
                         gemm, checked)


def int8_amx_reference(x: torch.Tensor, weight: Int8AmxWeight) -> torch.Tensor:
    """Torch reference: the kernel's arithmetic in float64 (every level's sum an exact
    integer there), then the same scaling and one rounding to float32; a row of ``x`` holding
    inf or nan gives nan."""
    check_tensor("x", x, ndim=2, dtypes=(_F32,), device=_CPU)
    finite = torch.isfinite(x).all(1)
    v, e = fixed_rows(torch.where(finite[:, None], x, torch.zeros_like(x)))
    xd = digit_planes(v).to(_F64)
    q = weight.unpack()
    codes = q.codes.to(_F64)
    t = (xd[0] @ codes.T) * 65536 + (xd[1] @ codes.T) * 256 + xd[2] @ codes.T
    y = (t * torch.pow(2.0, -e.to(_F64))[:, None] * q.scales.to(_F64)[None, :]).to(_F32)
    return torch.where(finite[:, None], y, torch.full_like(y, float("nan")))
