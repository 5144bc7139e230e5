"""Triton RMSNorm, optionally fused with the residual add before it.

Matches :func:`rms_norm_ref` / :func:`fused_add_rms_norm_ref`, including their rounding
points: the sum ``x + residual`` is rounded to the input dtype (it is the next residual), the
statistics are float32, and the normalised row is rounded to the input dtype before the
weight multiply (Hugging Face ``LlamaRMSNorm``). One program per row holds the whole row.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.rms_norm import check_rms_norm_args
from .launch import (
    check_launchable,
    check_out,
    check_same_device,
    check_unit_inner_stride,
    next_pow2,
)

MAX_HIDDEN = 65536  # one row per program, held in registers


@triton.jit
def _rms_norm_kernel(
    x_ptr, residual_ptr, weight_ptr, out_ptr, sum_ptr,
    stride_x, stride_r, stride_o, stride_s, hidden, eps,
    HAS_RESIDUAL: tl.constexpr, BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    in_row = cols < hidden
    x = tl.load(x_ptr + row * stride_x + cols, mask=in_row, other=0.0).to(tl.float32)
    if HAS_RESIDUAL:
        r = tl.load(residual_ptr + row * stride_r + cols, mask=in_row, other=0.0)
        x_sum = (x + r.to(tl.float32)).to(sum_ptr.dtype.element_ty)  # the next residual
        tl.store(sum_ptr + row * stride_s + cols, x_sum, mask=in_row)
        x = x_sum.to(tl.float32)
    variance = tl.sum(x * x, 0) / hidden
    normed = (x * tl.rsqrt(variance + eps)).to(x_ptr.dtype.element_ty).to(tl.float32)
    w = tl.load(weight_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    tl.store(out_ptr + row * stride_o + cols, (normed * w).to(out_ptr.dtype.element_ty),
             mask=in_row)


def _launch(
    x: torch.Tensor, residual: torch.Tensor | None, weight: torch.Tensor, eps: float,
    out: torch.Tensor | None, residual_out: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    check_rms_norm_args(x, weight, residual)
    check_launchable("x", x, _rms_norm_kernel)
    check_same_device("x", x, weight=weight, residual=residual, out=out,
                      residual_out=residual_out)
    for name, t in (("x", x), ("residual", residual), ("weight", weight)):
        if t is not None:
            check_unit_inner_stride(name, t)
    num_rows, hidden = x.shape
    if hidden > MAX_HIDDEN:
        raise ValueError(f"x: hidden size up to {MAX_HIDDEN} supported, got {hidden}")
    out_dtype = torch.promote_types(x.dtype, weight.dtype)  # as `weight * normed` in torch
    if out is None:
        out = torch.empty(x.shape, dtype=out_dtype, device=x.device)
    else:
        check_out("out", out, tuple(x.shape), x, out_dtype)
    if residual is not None:
        if residual_out is None:
            residual_out = torch.empty_like(x, memory_format=torch.contiguous_format)
        else:
            check_out("residual_out", residual_out, tuple(x.shape), x)
    if num_rows == 0:
        return out, residual_out
    block = next_pow2(hidden)
    _rms_norm_kernel[(num_rows,)](
        x, x if residual is None else residual, weight, out,
        out if residual_out is None else residual_out,
        x.stride(0), 0 if residual is None else residual.stride(0), out.stride(0),
        0 if residual_out is None else residual_out.stride(0), hidden, eps,
        HAS_RESIDUAL=residual is not None, BLOCK=block, num_warps=min(max(block // 256, 1), 16),
    )
    return out, residual_out


def rms_norm_triton(
    x: torch.Tensor, weight: torch.Tensor, eps: float, *, out: torch.Tensor | None = None
) -> torch.Tensor:
    """Triton version of :func:`rms_norm_ref`. x: [num_tokens, hidden] (rows may be strided)."""
    return _launch(x, None, weight, eps, out, None)[0]


def fused_add_rms_norm_triton(
    x: torch.Tensor,
    residual: torch.Tensor,
    weight: torch.Tensor,
    eps: float,
    *,
    out: torch.Tensor | None = None,
    residual_out: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of :func:`fused_add_rms_norm_ref`: ``(rms_norm(x + r), x + r)``.

    Inputs are not modified; ``out``/``residual_out``, if given, receive the two results.
    """
    normed, summed = _launch(x, residual, weight, eps, out, residual_out)
    assert summed is not None  # a residual was given
    return normed, summed
