"""The gated MLP's activations on the fused gate/up projection's rows: ``silu(gate) * up``
(Llama family) and ``gelu_tanh(gate) * up`` (Gemma's ``gelu_pytorch_tanh``: ``F.gelu`` with
``approximate="tanh"``, the op transformers calls, so the rounding matches)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .checks import FLOAT_DTYPES, check_tensor


def _gate_up(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The gate and up halves of x ``[T, 2 I]`` (gate columns first), checked."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    if x.shape[1] % 2:
        raise ValueError(f"x: expected an even number of columns (gate | up), got "
                         f"{tuple(x.shape)}")
    gate, up = x.split(x.shape[1] // 2, dim=-1)
    return gate, up


def silu_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[:, :I]) * x[:, I:]`` for x ``[T, 2 I]`` (gate columns, then up): ``[T, I]``."""
    gate, up = _gate_up(x)
    return F.silu(gate).mul_(up)  # in place: one [T, I] less


def gelu_tanh_mul_ref(x: torch.Tensor) -> torch.Tensor:
    """``gelu_tanh(x[:, :I]) * x[:, I:]``, otherwise as :func:`silu_mul_ref`."""
    gate, up = _gate_up(x)
    return F.gelu(gate, approximate="tanh").mul_(up)
