"""int8 per-channel weight-only linear for a few float32 rows, on the native AVX-512 GEMV.

``y[m, n] = scales[n] * sum_k x[m, k] * codes[n, k]`` (the :class:`~.cpu_quant_linear.Int8Weight`
format) in float32 throughout: each int8 code is widened to float32 exactly and multiplied into
float32 FMA accumulators, so the result is the float32 product of ``x`` and the dequantized
weight up to float32 rounding (no bfloat16, no 8-bit activations). The kernel
(``kernels/native/int8_gemv.c``) reads each weight tile once for up to 8 rows and prefetches
ahead along the weight: at batch-1 decode a linear is bound by streaming its weight, and the
codes are a quarter of float32's bytes. More than 8 rows run in chunks of 8 (the weight is read
once per chunk; the dequantizing GEMMs win there).

Needs the built module ``radixlm.kernels.native.int8_gemv`` and a CPU with AVX-512 F/BW/VL
(:func:`int8_gemv_available`). One thread; the GIL is released while it runs.
"""

from __future__ import annotations

import torch

from ._checks import FLOAT_DTYPES, check_dim, check_tensor
from .cpu_quant_linear import Int8Weight
from .native import load

_NATIVE = load("int8_gemv")
PREFETCH_BYTES = 4096  # ahead of each weight row: ~7 rows of K=576 (measured 4.7 -> 8 GB/s)


def int8_gemv_available() -> bool:
    """True if the native module is built and this CPU has the instructions it needs."""
    return _NATIVE is not None and bool(_NATIVE.supported())


def _require_native():  # the module, or a clear error naming the remedy
    if _NATIVE is None:
        raise RuntimeError("radixlm.kernels.native.int8_gemv is not built: run "
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


def int8_gemv_linear(x: torch.Tensor, weight: Int8Weight) -> torch.Tensor:
    """``x @ weight.dequantize().T`` on the GEMV: ``[M, K] -> [M, N]`` in ``x``'s dtype (a
    float16/bfloat16 ``x`` is computed in float32 and rounded back; a strided one copied)."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    if x.dtype == torch.float32:
        return int8_gemv(x.contiguous(), weight.codes, weight.scales)
    return int8_gemv(x.to(torch.float32).contiguous(), weight.codes, weight.scales).to(x.dtype)


def int8_gemv_reference(x: torch.Tensor, codes: torch.Tensor,
                        scales: torch.Tensor) -> torch.Tensor:
    """Torch reference: the same product in float64, returned in float32."""
    y = x.to(torch.float64) @ codes.to(torch.float64).T * scales.to(torch.float64)
    return y.to(torch.float32)
