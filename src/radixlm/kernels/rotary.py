"""Rotary position embedding (RoPE), ``rotate_half`` layout as in Hugging Face Llama.

The cos/sin tables are built by the model (they depend on the config's theta and scaling);
this file only applies them: for a head vector split into halves ``(x1, x2)``,
``out = (x1*cos - x2*sin, x2*cos + x1*sin)``.
"""

from __future__ import annotations

import torch

from ._checks import FLOAT_DTYPES, INDEX_DTYPES, check_dim, check_tensor


def check_rotary_args(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> None:
    """Shapes: q [T, Hq, D], k [T, Hk, D], positions [T], cos/sin [max_pos, D/2]."""
    check_tensor("q", q, ndim=3, dtypes=FLOAT_DTYPES)
    check_tensor("k", k, ndim=3, dtypes=(q.dtype,), device=q.device)
    check_tensor("positions", positions, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    check_tensor("cos", cos, ndim=2, dtypes=FLOAT_DTYPES, device=q.device)
    check_tensor("sin", sin, ndim=2, dtypes=(cos.dtype,), device=q.device)
    check_dim("k", k, 0, q.shape[0])
    check_dim("k", k, 2, q.shape[2])
    check_dim("positions", positions, 0, q.shape[0])
    if q.shape[2] % 2:
        raise ValueError(f"q: head_dim must be even for rotary, got {q.shape[2]}")
    check_dim("cos", cos, 1, q.shape[2] // 2)
    if sin.shape != cos.shape:
        raise ValueError(f"sin: expected shape {tuple(cos.shape)}, got {tuple(sin.shape)}")


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def rotary_ref(
    q: torch.Tensor, k: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Return rotated ``(q, k)``; cos/sin are cast to q's dtype first, as Hugging Face does."""
    check_rotary_args(q, k, positions, cos, sin)
    c = cos[positions].to(q.dtype).unsqueeze(1)  # [T, 1, D/2]
    s = sin[positions].to(q.dtype).unsqueeze(1)
    return _rotate(q, c, s), _rotate(k, c, s)
