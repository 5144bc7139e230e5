"""int8 per-channel linears for a few rows on AVX-512 VNNI (``native/q4_gemv.c``, rows layout).

``y[m, n] = scales[n] * sum_k x[m, k] * codes[n, k]``, the
:class:`~.quant_linear.Int8Weight` format (``--quantization int8``), on the VNNI kernel of
:mod:`.q4_gemv` with one scale per output row instead of one per group of 32:
:class:`Int8VnniWeight` lays the codes out once in the same 16-row x 32 tiles (in a
:class:`~.q4_gemv.PackArena`: weights back to back in model order) with each block's 16
float32 scales after its tiles, so a weight takes ``1 + 4 / K`` bytes per element (the grouped
layout with the scale repeated per group would take 1.125).

Numerics: as the grouped kernel, each activation row becomes a 24-bit fixed-point integer with
a per-row power-of-two scale, multiplied in three 8-bit digit planes by VNNI integer dot
products; here the products add up in int32 over the whole row (exact for ``K <= 65536``),
each plane converts to float32 once (exactly for ``K <= 1024``, else to 2^-24 of itself), and
one float multiply per output applies the row's scale. The result differs from float32
``x @ W.T`` by about 2^-24 of the row's largest ``|x|`` times ``sum |w|`` (tested against the
float64 product). One call takes up to 8 rows per pass over the weight.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor
from .q4_gemv import (
    GROUP,
    MAX_ROWS,
    PackArena,
    PackedGemvWeight,
    packed_buffer,
    q4_gemv_available,
    q4_gemv_lib,
)
from .quant_linear import Int8Weight

MAX_K = 65536  # the int32 sums over a row: K * 255 * 128 < 2^31
_F32 = torch.float32


def int8_vnni_supports(weight: Int8Weight) -> bool:
    """True if the kernel is available and takes ``weight``'s shape (K a multiple of 32, at
    most :data:`MAX_K`)."""
    k = weight.shape[1]
    return q4_gemv_available() and k % GROUP == 0 and 0 < k <= MAX_K


@dataclass(frozen=True)
class Int8VnniWeight(PackedGemvWeight):
    """``packed`` uint8: the kernel's rows layout of an ``[n, k]`` per-channel int8 weight."""

    packed: torch.Tensor
    n: int
    k: int

    @classmethod
    def pack(cls, weight: Int8Weight, arena: PackArena | None = None) -> Int8VnniWeight:
        """Lay out ``weight`` (codes int8 ``[N, K]``, scales float32 ``[N]``) for the kernel
        (in ``arena`` if given); K must be a multiple of 32 and at most :data:`MAX_K`."""
        if not isinstance(weight, Int8Weight):
            raise TypeError(f"weight: expected an Int8Weight, got {type(weight).__name__}")
        if not q4_gemv_available():
            raise RuntimeError("the int8 VNNI kernel needs radixlm.kernels.cpu.native.q4_gemv "
                               "built and a CPU with AVX-512 VNNI (use int8-avx512 instead)")
        n, k = weight.shape
        if k % GROUP or not 0 < k <= MAX_K or n < 1:
            raise ValueError(f"weight: the int8 VNNI kernel needs K a multiple of {GROUP} up "
                             f"to {MAX_K} and N >= 1, got {(n, k)} (use int8-avx512 instead)")
        codes, scales = weight.codes.contiguous(), weight.scales.contiguous()
        lib = q4_gemv_lib()
        nbytes = lib.packed_bytes_rows(n, k)
        packed = packed_buffer(nbytes, arena)
        lib.pack_rows(packed.data_ptr(), codes.data_ptr(), scales.data_ptr(), n, k)
        return cls(packed, int(n), int(k))


class Int8VnniLinear:
    """``x @ weight.dequantize().T`` on the kernel: ``[M, K] -> [M, N]`` in ``x``'s dtype
    (computed in float32). A decode step makes ~120 such calls, so a float32 contiguous ``x``
    goes straight to the kernel with its pointers; anything else is checked and converted."""

    __slots__ = ("weight", "_gemv", "_ptr", "_n", "_k")

    def __init__(self, weight: Int8VnniWeight) -> None:
        self.weight = weight  # holds the buffer whose pointer is kept below
        self._gemv = q4_gemv_lib().gemv
        self._ptr = weight.packed.data_ptr()
        self._n, self._k = weight.shape

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if (type(x) is torch.Tensor and x.dtype == _F32 and x.is_cpu and x.dim() == 2
                and x.shape[1] == self._k and x.is_contiguous()):
            return self._run(x)
        check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES, device=torch.device("cpu"))
        check_dim("x", x, 1, self._k)
        return self._run(x.to(_F32).contiguous()).to(x.dtype)

    def _run(self, x: torch.Tensor) -> torch.Tensor:  # x: float32 [M, K] contiguous on CPU
        m, n, k = x.shape[0], self._n, self._k
        y = torch.empty(m, n, dtype=_F32)
        x_ptr, y_ptr = x.data_ptr(), y.data_ptr()
        for start in range(0, m, MAX_ROWS):  # rows 8 at a time: one pass over W each
            self._gemv(self._ptr, n, k, 8, False, x_ptr + 4 * start * k,
                       min(MAX_ROWS, m - start), y_ptr + 4 * start * n, True)
        return y
