"""The gated MLP's activation: ``silu(gate) * up`` on the fused gate/up projection's rows."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .checks import FLOAT_DTYPES, check_tensor


def silu_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[:, :I]) * x[:, I:]`` for x ``[T, 2 I]`` (gate columns, then up): ``[T, I]``."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    if x.shape[1] % 2:
        raise ValueError(f"x: expected an even number of columns (gate | up), got "
                         f"{tuple(x.shape)}")
    gate, up = x.split(x.shape[1] // 2, dim=-1)
    return F.silu(gate).mul_(up)  # in place: one [T, I] less
