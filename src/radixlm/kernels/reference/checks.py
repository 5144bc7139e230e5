"""Argument checks shared by every kernel launcher: they raise before any work is done."""

from __future__ import annotations

from collections.abc import Sequence

import torch


def check_tensor(
    name: str,
    t: object,
    *,
    ndim: int | None = None,
    dtypes: Sequence[torch.dtype] | None = None,
    device: torch.device | None = None,
    contiguous: bool = False,
) -> torch.Tensor:
    """Validate one argument and return it; the error names the argument and what was wrong."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if ndim is not None and t.ndim != ndim:
        raise ValueError(f"{name}: expected {ndim} dimensions, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        allowed = ", ".join(str(d) for d in dtypes)
        raise TypeError(f"{name}: expected dtype in ({allowed}), got {t.dtype}")
    # device equality first: reading ``.type`` twice costs more than the rest of the checks
    if device is not None and t.device != device and t.device.type != device.type:
        raise ValueError(f"{name}: expected a tensor on {device.type}, got one on {t.device}")
    if contiguous and not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor (call .contiguous())")
    return t


def check_dim(name: str, t: torch.Tensor, dim: int, expected: int) -> None:
    """Raise unless ``t.shape[dim] == expected``."""
    if t.shape[dim] != expected:
        raise ValueError(
            f"{name}: expected size {expected} at dim {dim}, got shape {tuple(t.shape)}"
        )


FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
INDEX_DTYPES = (torch.int32, torch.int64)
