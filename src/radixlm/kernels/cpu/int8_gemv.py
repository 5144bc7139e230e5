"""int8 per-channel weight-only linear for a few float32 rows, on the native AVX-512 GEMV.

``y[m, n] = scales[n] * sum_k x[m, k] * codes[n, k]`` (the :class:`~.quant_linear.Int8Weight`
format) in float32 throughout: each int8 code is widened to float32 exactly and multiplied into
float32 FMA accumulators, so the result is the float32 product of ``x`` and the dequantized
weight up to float32 rounding (no bfloat16, no 8-bit activations). The kernel
(``kernels/cpu/native/int8_gemv.c``) reads each weight tile once for up to 8 rows and prefetches
ahead along the weight: at batch-1 decode a linear is bound by streaming its weight, and the
codes are a quarter of float32's bytes. More than 8 rows run in chunks of 8 (the weight is read
once per chunk; the dequantizing GEMMs win there).

Needs the built module ``radixlm.kernels.cpu.native.int8_gemv`` and a CPU with AVX-512 F/BW/VL
(:func:`int8_gemv_available`). One thread; the GIL is released while it runs.
"""

from __future__ import annotations

import torch

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor
from .native import load
from .quant_linear import Int8Weight

_NATIVE = load("int8_gemv")
# ahead along the weight (into L2): streaming SmolLM2's 210 int8 matrices one by one at batch 1
# measured 4.4 GB/s without, 10.6 at 4 KiB and 11.7 at 8-16 KiB ahead with 4-row tiles; the
# 8-row tiles of 1-2 rows want 16-32 KiB (at 8 KiB they lose ~15% to 4-row tiles)
PREFETCH_BYTES = 24576
_F32 = torch.float32


def int8_gemv_available() -> bool:
    """True if the native module is built and this CPU has the instructions it needs."""
    return _NATIVE is not None and bool(_NATIVE.supported())


def _require_native():  # the module, or a clear error naming the remedy
    if _NATIVE is None:
        raise RuntimeError("radixlm.kernels.cpu.native.int8_gemv is not built: run "
                           "`python setup.py build_ext --inplace` (needs a C compiler)")
    if not _NATIVE.supported():
        raise RuntimeError("int8_gemv needs a CPU with AVX-512 F, BW and VL; this one lacks "
                           "them (use the other int8 kernels)")
    return _NATIVE


def int8_gemv(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
              prefetch: int = PREFETCH_BYTES) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` times ``codes`` int8 ``[N, K]`` scaled per output channel by
    ``scales`` float32 ``[N]``: float32 ``[M, N]``. All contiguous CPU tensors; anything
    else raises before the kernel runs. ``prefetch``: bytes ahead along each weight row."""
    native = _require_native()
    cpu = torch.device("cpu")
    check_tensor("x", x, ndim=2, dtypes=(torch.float32,), device=cpu, contiguous=True)
    check_tensor("codes", codes, ndim=2, dtypes=(torch.int8,), device=cpu, contiguous=True)
    check_tensor("scales", scales, ndim=1, dtypes=(torch.float32,), device=cpu,
                 contiguous=True)
    n, k = codes.shape
    check_dim("x", x, 1, k)
    check_dim("scales", scales, 0, n)
    m = x.shape[0]
    if m == 0 or n == 0 or k == 0:
        return x.new_zeros(m, n)
    out = torch.empty(m, n, dtype=torch.float32)
    native.gemv(x.data_ptr(), codes.data_ptr(), scales.data_ptr(), out.data_ptr(), m, n, k,
                prefetch)
    return out


class Int8GemvLinear:
    """``x @ weight.dequantize().T`` on the GEMV, the weight checked once: ``[M, K] -> [M, N]``
    in ``x``'s dtype (a float16/bfloat16 ``x`` is computed in float32 and rounded back, a
    strided one copied). A decode step makes ~120 such calls, so a float32 contiguous ``x``
    goes straight to the kernel with its pointers (~1.5 us instead of ~6 through
    :func:`int8_gemv`'s checks); anything else takes :func:`int8_gemv`'s checked path."""

    __slots__ = ("weight", "_gemv", "_codes", "_scales", "_n", "_k", "_prefetch")

    def __init__(self, weight: Int8Weight, prefetch: int = PREFETCH_BYTES) -> None:
        native = _require_native()
        if not isinstance(weight, Int8Weight):
            raise TypeError(f"weight: expected an Int8Weight, got {type(weight).__name__}")
        cpu = torch.device("cpu")
        check_tensor("weight.codes", weight.codes, device=cpu, contiguous=True)
        check_tensor("weight.scales", weight.scales, device=cpu, contiguous=True)
        if prefetch < 0:
            raise ValueError(f"prefetch must be >= 0 bytes, got {prefetch}")
        self.weight = weight  # holds the tensors whose pointers are kept below
        self._gemv = native.gemv
        self._codes, self._scales = weight.codes.data_ptr(), weight.scales.data_ptr()
        self._n, self._k = weight.shape
        self._prefetch = prefetch

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if (type(x) is torch.Tensor and x.dtype == _F32 and x.is_cpu and x.dim() == 2
                and x.shape[1] == self._k and x.shape[0] > 0 and x.is_contiguous()):
            m = x.shape[0]
            out = torch.empty(m, self._n)
            self._gemv(x.data_ptr(), self._codes, self._scales, out.data_ptr(), m, self._n,
                       self._k, self._prefetch)
            return out
        check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
        w = self.weight
        y = int8_gemv(x.to(torch.float32).contiguous(), w.codes, w.scales, self._prefetch)
        return y.to(x.dtype)


def int8_gemv_linear(x: torch.Tensor, weight: Int8Weight) -> torch.Tensor:
    """``x @ weight.dequantize().T`` on the GEMV (:class:`Int8GemvLinear` for one call)."""
    return Int8GemvLinear(weight)(x)


def int8_gemv_reference(x: torch.Tensor, codes: torch.Tensor,
                        scales: torch.Tensor) -> torch.Tensor:
    """Torch reference: the same product in float64, returned in float32."""
    y = x.to(torch.float64) @ codes.to(torch.float64).T * scales.to(torch.float64)
    return y.to(torch.float32)
