"""float32 linear for a few rows (batch-1..32 decode) on the native AVX-512 GEMV.

``y[m, n] = sum_k x[m, k] * weight[n, k]``, float32 in, float32 accumulators, float32 out:
the product ``F.linear`` computes, in another summation order (~1e-7 relative). The kernel
(``kernels/cpu/native/f32_gemv.c``) reads the weight as torch stores it (no packed copy), each
tile of 4 weight rows from memory once for all the rows of ``x``, and prefetches ahead along
the weight: a batch-1 decode step is bound by streaming its float32 weights, and small
matrices read one after another get little help from the hardware prefetcher.

Needs the built module ``radixlm.kernels.cpu.native.f32_gemv`` and a CPU with AVX-512 F
(:func:`f32_gemv_available`). One thread; the GIL is released while it runs.
"""

from __future__ import annotations

import torch

from ..reference.checks import check_dim, check_tensor
from .native import load, require, unavailable_reason

_NATIVE = load("f32_gemv")
_NEEDS = "AVX-512 F"  # what its supported() checks
# ahead along each weight row (into L2), in bytes: streaming SmolLM2's 121 float32 matrices
# in model order measured (ms per pass at 1 / 8 rows) 28 / 33 at 8 KiB, 27 / 28 at 16,
# 26 / 26.5 at 24, 27 / 26.5 at 32 and 28 / 27 at 64 (35.7 / 69.5 without)
PREFETCH_BYTES = 24576
_F32 = torch.float32
_CPU = torch.device("cpu")


def f32_gemv_available() -> bool:
    """True if the native module is built and this CPU has the instructions it needs."""
    return not unavailable_reason(_NATIVE, "f32_gemv", _NEEDS)


def _check_prefetch(prefetch: int) -> None:
    if prefetch < 0:
        raise ValueError(f"prefetch must be >= 0 bytes, got {prefetch}")


def f32_gemv(x: torch.Tensor, weight: torch.Tensor,
             prefetch: int = PREFETCH_BYTES) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` times ``weight`` float32 ``[N, K]`` transposed: float32
    ``[M, N]``. Both contiguous CPU tensors; anything else raises before the kernel runs.
    ``prefetch``: bytes ahead along each weight row."""
    native = require(_NATIVE, "f32_gemv", _NEEDS)
    check_tensor("x", x, ndim=2, dtypes=(_F32,), device=_CPU, contiguous=True)
    check_tensor("weight", weight, ndim=2, dtypes=(_F32,), device=_CPU, contiguous=True)
    _check_prefetch(prefetch)
    n, k = weight.shape
    check_dim("x", x, 1, k)
    m = x.shape[0]
    if m == 0 or n == 0 or k == 0:
        return x.new_zeros(m, n)
    out = torch.empty(m, n, dtype=_F32)
    native.gemv(x.data_ptr(), weight.data_ptr(), out.data_ptr(), m, n, k, prefetch)
    return out


class F32GemvLinear:
    """``x @ weight.T`` on the GEMV, the weight checked once: ``[M, K] -> [M, N]`` float32.
    A decode step makes ~120 such calls, so a contiguous float32 ``x`` goes straight to the
    kernel with its pointers; anything else (strided, or an empty one) takes :func:`f32_gemv`'s
    checked path, and a dtype other than float32 is refused there."""

    __slots__ = ("weight", "_gemv", "_w", "_n", "_k", "_nonempty", "_prefetch")

    def __init__(self, weight: torch.Tensor, prefetch: int = PREFETCH_BYTES) -> None:
        native = require(_NATIVE, "f32_gemv", _NEEDS)
        check_tensor("weight", weight, ndim=2, dtypes=(_F32,), device=_CPU, contiguous=True)
        _check_prefetch(prefetch)
        self.weight = weight.detach()  # holds the tensor whose pointer is kept below
        self._gemv = native.gemv
        self._w = self.weight.data_ptr()
        self._n, self._k = weight.shape
        self._nonempty = self._n > 0 and self._k > 0
        self._prefetch = prefetch

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if (type(x) is torch.Tensor and x.dtype == _F32 and x.is_cpu and x.dim() == 2
                and x.shape[1] == self._k and x.shape[0] > 0 and self._nonempty
                and x.is_contiguous()):
            m = x.shape[0]
            out = torch.empty(m, self._n)
            self._gemv(x.data_ptr(), self._w, out.data_ptr(), m, self._n, self._k,
                       self._prefetch)
            return out
        check_tensor("x", x)
        return f32_gemv(x.contiguous(), self.weight, self._prefetch)


def f32_gemv_reference(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Torch reference: the same product in float64, returned in float32."""
    return (x.to(torch.float64) @ weight.to(torch.float64).T).to(_F32)
