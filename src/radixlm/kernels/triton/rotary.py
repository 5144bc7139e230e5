"""Triton rotary embedding (rotate_half layout) for q and k in one launch.

Matches :func:`rotary_ref`. One program per token loads the cos/sin rows of its position
and rotates all its query and key heads. Arithmetic is float32 with one rounding at the
store; the reference casts cos/sin to the input dtype first and rounds after each operation,
so half-precision results may differ by about one unit in the last place.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.rotary import check_rotary_args
from .launch import (
    check_launchable,
    check_out,
    check_same_device,
    check_unit_inner_stride,
    next_pow2,
)


@triton.jit
def _rotate_heads(
    x_ptr, out_ptr, token, cos, sin, stride_xt, stride_xh, stride_ot, stride_oh,
    NUM_HEADS: tl.constexpr, HALF: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_HALF: tl.constexpr,
):
    """Rotate the [NUM_HEADS, 2 * HALF] heads of one token; cos/sin are [1, BLOCK_HALF]."""
    offs_h = tl.arange(0, BLOCK_H)[:, None]
    offs_d = tl.arange(0, BLOCK_HALF)[None, :]
    mask = (offs_h < NUM_HEADS) & (offs_d < HALF)
    x_row = x_ptr + token * stride_xt + offs_h * stride_xh + offs_d
    x1 = tl.load(x_row, mask=mask, other=0.0).to(tl.float32)  # first half of each head
    x2 = tl.load(x_row + HALF, mask=mask, other=0.0).to(tl.float32)
    o_row = out_ptr + token * stride_ot + offs_h * stride_oh + offs_d
    tl.store(o_row, (x1 * cos - x2 * sin).to(out_ptr.dtype.element_ty), mask=mask)
    tl.store(o_row + HALF, (x2 * cos + x1 * sin).to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _rotary_kernel(
    q_ptr, k_ptr, positions_ptr, cos_ptr, sin_ptr, q_out_ptr, k_out_ptr,
    stride_qt, stride_qh, stride_kt, stride_kh, stride_cos, stride_sin,
    stride_qot, stride_qoh, stride_kot, stride_koh,
    NUM_Q_HEADS: tl.constexpr, NUM_K_HEADS: tl.constexpr, HALF: tl.constexpr,
    BLOCK_QH: tl.constexpr, BLOCK_KH: tl.constexpr, BLOCK_HALF: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    pos = tl.load(positions_ptr + token).to(tl.int64)
    offs_d = tl.arange(0, BLOCK_HALF)[None, :]
    cos = tl.load(cos_ptr + pos * stride_cos + offs_d, mask=offs_d < HALF, other=0.0)
    sin = tl.load(sin_ptr + pos * stride_sin + offs_d, mask=offs_d < HALF, other=0.0)
    cos = cos.to(tl.float32)
    sin = sin.to(tl.float32)
    _rotate_heads(q_ptr, q_out_ptr, token, cos, sin, stride_qt, stride_qh, stride_qot,
                  stride_qoh, NUM_Q_HEADS, HALF, BLOCK_QH, BLOCK_HALF)
    _rotate_heads(k_ptr, k_out_ptr, token, cos, sin, stride_kt, stride_kh, stride_kot,
                  stride_koh, NUM_K_HEADS, HALF, BLOCK_KH, BLOCK_HALF)


def rotary_triton(
    q: torch.Tensor,
    k: torch.Tensor,
    positions: torch.Tensor,
    cos: torch.Tensor,
    sin: torch.Tensor,
    *,
    q_out: torch.Tensor | None = None,
    k_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`rotary_ref`; returns new contiguous ``(q, k)``.

    q [T, Hq, D], k [T, Hk, D] may be strided views (e.g. slices of a fused QKV projection)
    as long as each head's D values are contiguous. Position values are trusted.
    """
    check_rotary_args(q, k, positions, cos, sin)
    check_launchable("q", q, _rotary_kernel)
    check_same_device("q", q, k=k, positions=positions, cos=cos, sin=sin, q_out=q_out,
                      k_out=k_out)
    for name, t in (("q", q), ("k", k), ("cos", cos), ("sin", sin)):
        check_unit_inner_stride(name, t)
    if not positions.is_contiguous():
        raise ValueError("positions: expected a contiguous tensor (call .contiguous())")
    if q_out is None:
        q_out = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    else:
        check_out("q_out", q_out, tuple(q.shape), q)
    if k_out is None:
        k_out = torch.empty(k.shape, dtype=k.dtype, device=k.device)
    else:
        check_out("k_out", k_out, tuple(k.shape), k)
    num_tokens, half = q.shape[0], q.shape[2] // 2
    if num_tokens == 0:
        return q_out, k_out
    _rotary_kernel[(num_tokens,)](
        q, k, positions, cos, sin, q_out, k_out,
        q.stride(0), q.stride(1), k.stride(0), k.stride(1), cos.stride(0), sin.stride(0),
        q_out.stride(0), q_out.stride(1), k_out.stride(0), k_out.stride(1),
        NUM_Q_HEADS=q.shape[1], NUM_K_HEADS=k.shape[1], HALF=half,
        BLOCK_QH=next_pow2(q.shape[1]), BLOCK_KH=next_pow2(k.shape[1]),
        BLOCK_HALF=next_pow2(half), num_warps=4,
    )
    return q_out, k_out
