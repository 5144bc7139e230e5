"""The prepared float32 linear shared by the native packed GEMMs (panel, AMX).

A step makes ~120 linear calls, so the common case (a contiguous float32 CPU ``x`` of the
right width) goes straight to the kernel on data pointers with no further checks; anything
else takes the kernel's checked launcher, which copies a strided ``x`` and raises a clear
error for the rest.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from ..reference.checks import check_dim, check_tensor

_F32 = torch.float32
NativeGemm = Callable[[int, int, int, int, int, int], None]  # (x, w, out, M, N, K) pointers
CheckedGemm = Callable[[torch.Tensor], torch.Tensor]  # x (contiguous) -> out, checked


def checked_gemm(gemm: NativeGemm, x: torch.Tensor, data: torch.Tensor, out_features: int,
                 in_features: int) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` (contiguous, CPU) times the packed weight ``data`` of a
    ``[N, K]`` weight, transposed, on the native ``gemm``: float32 ``[M, N]``; anything else
    raises before the kernel runs (empty sizes give zeros without it)."""
    check_tensor("x", x, ndim=2, dtypes=(_F32,), device=torch.device("cpu"), contiguous=True)
    check_dim("x", x, 1, in_features)
    m = x.shape[0]
    if m == 0 or out_features == 0 or in_features == 0:
        return x.new_zeros(m, out_features)
    out = torch.empty(m, out_features, dtype=_F32)
    gemm(x.data_ptr(), data.data_ptr(), out.data_ptr(), m, out_features, in_features)
    return out


class NativeF32Linear:
    """``x @ weight.T`` ``[M, K] -> [M, N]`` float32 on a native GEMM over a packed weight.

    ``gemm``: the native entry on pointers; ``data``: the packed tensor it reads (kept
    alive with ``weight``); ``checked``: the launcher for every other ``x``."""

    __slots__ = ("weight", "_gemm", "_checked", "_data", "_w", "_n", "_k", "_nonempty")

    def __init__(self, weight: object, data: torch.Tensor, out_features: int,
                 in_features: int, gemm: NativeGemm, checked: CheckedGemm) -> None:
        self.weight = weight
        self._data = data  # holds the tensor whose pointer is kept below
        self._gemm, self._checked = gemm, checked
        self._w = data.data_ptr()
        self._n, self._k = out_features, in_features
        self._nonempty = out_features > 0 and in_features > 0

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if (type(x) is torch.Tensor and x.dtype == _F32 and x.is_cpu and x.dim() == 2
                and x.shape[1] == self._k and x.shape[0] > 0 and self._nonempty
                and x.is_contiguous()):
            out = torch.empty(x.shape[0], self._n)
            self._gemm(x.data_ptr(), self._w, out.data_ptr(), x.shape[0], self._n, self._k)
            return out
        check_tensor("x", x)
        return self._checked(x.contiguous())
