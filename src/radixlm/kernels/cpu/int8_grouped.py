"""int8 weights with one scale per group of 32 along K (GGUF's Q8_0) on torch's int4 kernel.

``w[n, k] = codes[n, k] * scale[n, k // g]`` with codes in ``[-128, 127]``. Torch's int8 CPU
kernel takes one scale per output channel, so grouped scales do not fit it; instead each code
is split into nibbles, ``code = 16 h + l`` with ``h = floor(code / 16)`` in ``[-8, 7]`` and
``l`` in ``[0, 15]``, so that ``w = (16 scale) h + scale l``. In the int4 convention
``(c - 8) * s + z`` (``quant_linear.py``) that is two planes of one int4 weight
``[2N, K]``: rows ``n`` hold ``c = h + 8`` with ``s = 16 scale, z = 0``, rows ``N + n`` hold
``c = l`` with ``s = scale, z = 8 scale``. One ``_weight_int4pack_mm_for_cpu`` call over both
planes reads 8 bits per weight (plus the scale tables) instead of float32's 32, and the two
halves of its output add up to ``x @ W.T``.

Numerics: those of the int4 kernel (activations, scales and the output rounded to bfloat16),
about 3e-3 of the largest output; the planes' float32 dequantization is exact (tested), and
callers offer float32 ``F.linear`` beside it (chosen by measurement, e.g. for many rows).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor
from .quant_linear import Int4Weight, int4_linear


@dataclass(frozen=True)
class Int8GroupedWeight:
    """codes int8 ``[N, K]``; scales float32 ``[N, K // group]``; ``planes`` the int4 pair."""

    codes: torch.Tensor
    scales: torch.Tensor
    group_size: int
    planes: Int4Weight  # [2N, K]: the high nibbles' rows, then the low nibbles'

    @classmethod
    def build(cls, codes: torch.Tensor, scales: torch.Tensor,
              group_size: int = 32) -> Int8GroupedWeight:
        """Validate codes/scales and split them into the two int4 planes."""
        check_tensor("codes", codes, ndim=2, dtypes=(torch.int8,))
        check_tensor("scales", scales, ndim=2, dtypes=(torch.float32,))
        n, k = codes.shape
        if k % group_size or tuple(scales.shape) != (n, k // group_size):
            raise ValueError(f"scales: expected shape {(n, k // group_size)} for codes "
                             f"{(n, k)} in groups of {group_size}, got {tuple(scales.shape)}")
        wide = codes.to(torch.int16)
        high = torch.div(wide, 16, rounding_mode="floor")  # [-8, 7]
        low = wide - 16 * high  # [0, 15]
        plane_codes = torch.cat([high + 8, low]).to(torch.uint8)
        plane_scales = torch.cat([16.0 * scales, scales])
        plane_zeros = torch.cat([torch.zeros_like(scales), 8.0 * scales])
        planes = Int4Weight.build(plane_codes, plane_scales, plane_zeros, group_size)
        return cls(codes.contiguous(), scales.contiguous(), group_size, planes)

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.codes.shape[0]), int(self.codes.shape[1])

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The float weight ``[N, K]``: ``codes * scale`` of each group."""
        n, k = self.shape
        g = self.group_size
        w = self.codes.to(torch.float32).reshape(n, k // g, g) * self.scales[:, :, None]
        return w.reshape(n, k).to(dtype)


def int8_grouped_linear(x: torch.Tensor, weight: Int8GroupedWeight) -> torch.Tensor:
    """``x @ weight.dequantize().T`` through both int4 planes in one call: ``[M, K] -> [M, N]``."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    n, k = weight.shape
    check_dim("x", x, 1, k)
    both = int4_linear(x, weight.planes)  # [M, 2N]
    return both[:, :n] + both[:, n:]
