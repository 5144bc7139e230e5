"""Rotary position embedding (RoPE), ``rotate_half`` layout as in Hugging Face Llama.

The cos/sin tables are built by the model (they depend on the config's theta and scaling);
this file only applies them: for a head vector split into halves ``(x1, x2)``,
``out = (x1*cos - x2*sin, x2*cos + x1*sin)``.

:func:`rotary_rows_ref` is the same arithmetic on tables already gathered at the tokens'
positions (once per forward, shared by every layer) and on the query and key heads in one
tensor: a few elementwise ops per layer instead of two gathers, two casts and two rotations.
Its tables are full width, ``cos2 = (cos, cos)`` and ``sin2 = (-sin, sin)``, so that
``out = x * cos2 + swap(x) * sin2`` with ``swap(x) = (x2, x1)``: the same roundings as
``(x1*cos - x2*sin, x2*cos + x1*sin)`` (``x2 * -sin`` is ``-(x2 * sin)`` exactly and
``a + -b`` is ``a - b``), in four calls instead of nine.
"""

from __future__ import annotations

import torch

from .checks import FLOAT_DTYPES, INDEX_DTYPES, check_dim, check_tensor


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


def rotary_rows(
    positions: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, dtype: torch.dtype
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token full-width ``(cos2, sin2)`` rows [T, 1, D] in ``dtype`` for
    :func:`rotary_rows_ref`: ``cos2 = (cos, cos)``, ``sin2 = (-sin, sin)`` at each position
    (the gather and cast :func:`rotary_ref` makes, done once for all layers)."""
    check_tensor("positions", positions, ndim=1, dtypes=INDEX_DTYPES, device=cos.device)
    check_tensor("cos", cos, ndim=2, dtypes=FLOAT_DTYPES)
    check_tensor("sin", sin, ndim=2, dtypes=(cos.dtype,), device=cos.device)
    c = cos[positions].to(dtype)
    s = sin[positions].to(dtype)
    return torch.cat((c, c), -1).unsqueeze(1), torch.cat((-s, s), -1).unsqueeze(1)


def rotary_rows_ref(qk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate every head of ``qk`` [T, H, D] (query heads then key heads, e.g. a view of the
    fused QKV output) by full-width rows ``cos``/``sin`` [T, 1, D] from :func:`rotary_rows`;
    returns a new contiguous [T, H, D], bit-identical to :func:`rotary_ref` on the same heads."""
    check_tensor("qk", qk, ndim=3, dtypes=FLOAT_DTYPES)
    t, h, d = qk.shape
    if cos.shape != (t, 1, d) or sin.shape != cos.shape or d % 2:
        raise ValueError(f"cos/sin: expected rows of shape {(t, 1, d)} for qk {tuple(qk.shape)}"
                         f" (even head_dim), got {tuple(cos.shape)}, {tuple(sin.shape)}")
    if cos.dtype != qk.dtype or sin.dtype != qk.dtype:
        raise TypeError(f"cos/sin: expected dtype {qk.dtype} (rotary_rows casts them), got "
                        f"{cos.dtype}, {sin.dtype}")
    swapped = qk.view(t, h, 2, d // 2).flip(2).view(t, h, d)  # (x2, x1): a new tensor
    return (qk * cos).add_(swapped.mul_(sin))
