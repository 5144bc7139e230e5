"""Applying grammar bitmasks to CPU logits natively (``token_bitmask.c``: AVX-512 masked
stores of ``-inf``: 0.01 ms for one 49k row, 0.02 for 5, 0.03 for 9) or, where that module
was not built, with numpy: the very same logits as
:func:`~radixlm.kernels.reference.token_bitmask.apply_token_bitmask_ref` (untouched, or the
bits of ``-inf``), without torch's ``[rows, words, 32]`` int32 unpack.

Why: a speculative verify masks ``k + 1`` rows of a 49k vocabulary per request; the reference
shifts and widens every bit into an int32, then copies the rows out and back through advanced
indexing: 0.6-1.4 ms for 5 rows (runs of bans to random bits), 0.15 ms for one. Here
``np.unpackbits`` over the words' bytes (little-endian: byte ``4w + j`` bit ``b`` is token
``32w + 8j + b``, the reference's bit order) gives one byte a token, widened to an int32
lane mask (-1: banned), and three branch-free bitwise passes over the logits' bits select
``-inf`` where banned: 0.14 ms for 5 rows, 0.04 ms for one, whatever the mask (thread CPU
time, one Zen 4 core; a masked store, ``np.putmask``, pays branch misses on a JSON string's
scattered bans: ~0.13-0.18 ms a row).

Taken on float32, 2-D, contiguous CPU logits without autograd, with distinct ``rows`` in
range (the scheduler's case); anything else goes to the reference (which, for a repeated row,
keeps the last mask alone, wraps a negative row and raises past the end: not reproduced
here).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from ..reference.token_bitmask import apply_token_bitmask_ref, check_bitmask_args
from .native import load

_NATIVE = load("token_bitmask")

_NUMPY_DTYPES = (torch.float32,)


def apply_token_bitmask_cpu(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None = None,
    portable: bool = False,
) -> None:
    """In place: ``logits[rows[r], t] = -inf`` where bit t of ``bitmask[r]`` is clear (as the
    reference; see module doc). ``portable``: the native module's loop for a CPU without
    AVX-512 (for its tests)."""
    check_bitmask_args(logits, bitmask, rows)
    if (logits.device.type != "cpu" or logits.dtype not in _NUMPY_DTYPES
            or not logits.is_contiguous() or logits.requires_grad
            or not bitmask.is_contiguous() or sys.byteorder != "little"):
        apply_token_bitmask_ref(logits, bitmask, rows)
        return
    order = list(range(logits.shape[0])) if rows is None else rows.tolist()
    vocab = logits.shape[1]
    if not order or not vocab:  # nothing to mask (an empty tensor's data pointer may be null)
        return
    if rows is not None and (len(set(order)) != len(order) or min(order) < 0
                             or max(order) >= logits.shape[0]):
        apply_token_bitmask_ref(logits, bitmask, rows)  # its indexing's wrap or IndexError
        return
    if _NATIVE is not None:
        index = None if rows is None else rows.to(torch.int64).contiguous()
        _NATIVE.apply_rows(logits.data_ptr(), bitmask.data_ptr(),
                           0 if index is None else index.data_ptr(), bitmask.shape[0], vocab,
                           logits.stride(0), bitmask.stride(0), not portable)
        return
    out = logits.numpy().view(np.int32)  # the logits' bits
    # int32 [R, vocab]: -1 where the token is banned, 0 where allowed
    banned = np.unpackbits(bitmask.numpy().view(np.uint8), axis=1,
                           bitorder="little")[:, :vocab].astype(np.int32)
    banned -= 1
    first = order[0]
    if order == list(range(first, first + len(order))):  # a block of rows: one pass
        _select(out[first:first + len(order)], banned)
        return
    for r, row in enumerate(order):
        _select(out[row], banned[r])


_NEG_INF_BITS = np.float32(-np.inf).view(np.int32)


def _select(bits: np.ndarray, banned: np.ndarray) -> None:
    """``bits = banned ? bits(-inf) : bits`` in place (``banned``: -1 or 0 lanes; clobbered)."""
    np.bitwise_and(bits, np.invert(banned), out=bits)
    np.bitwise_and(banned, _NEG_INF_BITS, out=banned)
    np.bitwise_or(bits, banned, out=bits)
