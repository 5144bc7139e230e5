"""Triton grammar bitmask: set disallowed logits to -inf, in place, for the listed rows.

Matches :func:`apply_token_bitmask_ref`. One program per (mask row, block of BLOCK_V tokens)
reads the block's int32 words and writes -inf only where a bit is clear: allowed logits are
neither read nor written.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.token_bitmask import check_bitmask_args
from .launch import check_launchable, check_same_device, check_unit_inner_stride

BLOCK_V = 1024


@triton.jit
def _bitmask_kernel(
    logits_ptr, bitmask_ptr, rows_ptr, vocab_size, stride_logits, stride_mask,
    HAS_ROWS: tl.constexpr, BLOCK_V: tl.constexpr,
):
    mask_row = tl.program_id(0).to(tl.int64)
    offs = tl.program_id(1) * BLOCK_V + tl.arange(0, BLOCK_V)  # token ids
    in_vocab = offs < vocab_size
    if HAS_ROWS:
        row = tl.load(rows_ptr + mask_row).to(tl.int64)
    else:
        row = mask_row
    words = tl.load(bitmask_ptr + mask_row * stride_mask + offs // 32, mask=in_vocab, other=-1)
    allowed = ((words >> (offs % 32)) & 1) != 0  # arithmetic shift: bit 31 still reads right
    tl.store(logits_ptr + row * stride_logits + offs, float("-inf"),
             mask=in_vocab & ~allowed)


def apply_token_bitmask_triton(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None = None
) -> None:
    """Triton version of :func:`apply_token_bitmask_ref` (in place on ``logits``).

    logits: [N, V] (rows may be strided); bitmask: int32 [R, >= ceil(V/32)], last dim
    contiguous; rows: [R] logits row of each mask row (values trusted), or None (R = N).
    """
    check_bitmask_args(logits, bitmask, rows)
    check_launchable("logits", logits, _bitmask_kernel)
    check_same_device("logits", logits, bitmask=bitmask, rows=rows)
    check_unit_inner_stride("logits", logits)
    check_unit_inner_stride("bitmask", bitmask)
    if rows is not None and not rows.is_contiguous():
        raise ValueError("rows: expected a contiguous tensor (call .contiguous())")
    num_rows, vocab_size = bitmask.shape[0], logits.shape[1]
    if num_rows == 0 or vocab_size == 0:
        return
    _bitmask_kernel[(num_rows, triton.cdiv(vocab_size, BLOCK_V))](
        logits, bitmask, bitmask if rows is None else rows, vocab_size,
        logits.stride(0), bitmask.stride(0), HAS_ROWS=rows is not None, BLOCK_V=BLOCK_V,
        num_warps=4,
    )
