"""Applying per-request grammar bitmasks to a batch of logits.

A bitmask row is int32 ``[ceil(V / 32)]``; bit ``t % 32`` of word ``t // 32`` set means token
``t`` is allowed. Disallowed logits become ``-inf``; rows not listed are left untouched, so
unconstrained requests in the same batch pay nothing.
"""

from __future__ import annotations

import torch

from .checks import FLOAT_DTYPES, INDEX_DTYPES, check_tensor


def check_bitmask_args(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None
) -> None:
    check_tensor("logits", logits, ndim=2, dtypes=FLOAT_DTYPES)
    check_tensor("bitmask", bitmask, ndim=2, dtypes=(torch.int32,), device=logits.device)
    words = (logits.shape[1] + 31) // 32
    if bitmask.shape[1] < words:
        raise ValueError(
            f"bitmask: expected at least {words} int32 words per row for {logits.shape[1]} "
            f"logits, got {bitmask.shape[1]}"
        )
    n_rows = logits.shape[0] if rows is None else rows.shape[0]
    if bitmask.shape[0] != n_rows:
        raise ValueError(f"bitmask: expected {n_rows} rows, got {bitmask.shape[0]}")
    if rows is not None:
        check_tensor("rows", rows, ndim=1, dtypes=INDEX_DTYPES, device=logits.device)


def unpack_bitmask(bitmask: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """int32 [R, W] -> bool [R, vocab_size] (True = allowed)."""
    shifts = torch.arange(32, device=bitmask.device, dtype=torch.int32)
    bits = (bitmask.unsqueeze(-1) >> shifts) & 1  # [R, W, 32]
    return bits.reshape(bitmask.shape[0], bitmask.shape[1] * 32)[:, :vocab_size].bool()


def apply_token_bitmask_ref(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None = None
) -> None:
    """In place: ``logits[rows[r], t] = -inf`` where bit t of ``bitmask[r]`` is clear."""
    check_bitmask_args(logits, bitmask, rows)
    allowed = unpack_bitmask(bitmask, logits.shape[1])
    if rows is None:
        logits.masked_fill_(~allowed, float("-inf"))
    else:
        idx = rows.long()
        logits[idx] = logits[idx].masked_fill(~allowed, float("-inf"))
