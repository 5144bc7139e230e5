"""float32 linear for prefill-sized batches on AMX tiles, float32-accurate.

``y[m, n] = sum_k x[m, k] * weight[n, k]``, float32 in and out. AMX multiplies bfloat16, so
the kernel (``kernels/cpu/native/f32_amx_gemm.c``) cuts each float32 operand into three bfloat16
pieces that sum to it exactly and accumulates the six products that matter in float32: each
output's error stays below ``2^-20`` of ``sum_k |x[m, k] * weight[n, k]|``, the size of a
float32 dot product's own rounding (another summation order than MKL's, ~1e-7 relative; not
bit-identical to it). The weight is packed once at load into tile units of 16 output columns
x 32 k in AMX's pair order, ``[ceil(N / 16), ceil(K / 32), 16, 16, 2]``
(:class:`F32AmxWeight`).

Where it pays: many rows (3 layers of SmolLM2-135M's linears at 512 rows 58 vs oneDNN's
70 ms, at 128 rows 15 vs 20; see the C file); at decode sizes the panel GEMM and the GEMV win,
and the load-time measurement (``runtime/model/gemm_choice.py``) keeps each where it won.

Needs the built module ``radixlm.kernels.cpu.native.f32_amx_gemm``, a CPU with AMX-BF16 and
AVX512-BF16, and a Linux kernel that lets the process use AMX (:func:`f32_amx_gemm_available`).
One thread; the GIL is released while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..reference.checks import check_tensor
from .f32_linear import NativeF32Linear, checked_gemm
from .native import load, require, unavailable_reason

_NATIVE = load("f32_amx_gemm")
_NEEDS = "AMX-BF16 and AVX512-BF16 (and a kernel that grants AMX state)"
TILE_N, TILE_K = 16, 32  # output columns and k per packed unit (the C file's TN, TK)
_F32 = torch.float32
_CPU = torch.device("cpu")


def f32_amx_gemm_available() -> bool:
    """True if the native module is built and this CPU and kernel can run AMX."""
    return not unavailable_reason(_NATIVE, "f32_amx_gemm", _NEEDS)


def _units_shape(out_features: int, in_features: int) -> tuple[int, int, int, int, int]:
    return (-(-out_features // TILE_N), -(-in_features // TILE_K), TILE_K // 2, TILE_N, 2)


@dataclass(frozen=True)
class F32AmxWeight:
    """A float32 weight ``[N, K]`` packed as ``units``
    ``[ceil(N / 16), ceil(K / 32), 16, 16, 2]``: ``units[t, b, r, c, e]`` is
    ``weight[16t + c, 32b + 2r + e]``, zeros past ``N`` and ``K``."""

    units: torch.Tensor
    out_features: int
    in_features: int

    def __post_init__(self) -> None:
        check_tensor("units", self.units, ndim=5, dtypes=(_F32,), device=_CPU,
                     contiguous=True)
        expected = _units_shape(self.out_features, self.in_features)
        if tuple(self.units.shape) != expected:
            raise ValueError(f"units: expected shape {expected} for a [{self.out_features}, "
                             f"{self.in_features}] weight, got {tuple(self.units.shape)}")

    @classmethod
    def pack(cls, weight: torch.Tensor) -> F32AmxWeight:
        """Packs a float32 CPU weight ``[N, K]`` (a linear's, as torch stores it)."""
        check_tensor("weight", weight, ndim=2, dtypes=(_F32,), device=_CPU)
        n, k = weight.shape
        padded = F.pad(weight.detach(), (0, -k % TILE_K, 0, -n % TILE_N))  # [N16, K32]
        tiles, blocks = padded.shape[0] // TILE_N, padded.shape[1] // TILE_K
        units = padded.view(tiles, TILE_N, blocks, TILE_K // 2, 2).permute(0, 2, 3, 1, 4)
        return cls(units.contiguous(), n, k)

    def unpack(self) -> torch.Tensor:
        """The weight ``[N, K]`` back (for the reference and tests)."""
        tiles, blocks = self.units.shape[:2]
        padded = self.units.permute(0, 3, 1, 2, 4).reshape(tiles * TILE_N, blocks * TILE_K)
        return padded[: self.out_features, : self.in_features]


def f32_amx_gemm(x: torch.Tensor, weight: F32AmxWeight) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` (contiguous, CPU) times the packed weight transposed: float32
    ``[M, N]``; anything else raises before the kernel runs."""
    native = require(_NATIVE, "f32_amx_gemm", _NEEDS)
    return checked_gemm(native.gemm, x, weight.units, weight.out_features, weight.in_features)


class F32AmxLinear(NativeF32Linear):
    """``x @ weight.T`` on the AMX GEMM, the weight packed once: ``[M, K] -> [M, N]`` float32.
    A contiguous float32 ``x`` goes straight to the kernel; anything else takes
    :func:`f32_amx_gemm`'s checked path."""

    __slots__ = ()

    def __init__(self, weight: torch.Tensor | F32AmxWeight) -> None:
        native = require(_NATIVE, "f32_amx_gemm", _NEEDS)
        packed = weight if isinstance(weight, F32AmxWeight) else F32AmxWeight.pack(weight)
        super().__init__(packed, packed.units, packed.out_features, packed.in_features,
                         native.gemm, lambda x: f32_amx_gemm(x, packed))


def f32_amx_gemm_reference(x: torch.Tensor, weight: F32AmxWeight) -> torch.Tensor:
    """Torch reference: the same product in float64 on the unpacked weight, in float32."""
    return (x.to(torch.float64) @ weight.unpack().to(torch.float64).T).to(_F32)
