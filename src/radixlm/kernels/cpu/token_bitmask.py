"""Applying grammar bitmasks to CPU logits with numpy: the same ``-inf`` cells as
:func:`~radixlm.kernels.reference.token_bitmask.apply_token_bitmask_ref`, without torch's
``[rows, words, 32]`` int32 unpack.

Why: a speculative verify masks ``k + 1`` rows of a 49k vocabulary per request; the reference
shifts and widens every bit into an int32 (6 MB for 5 rows), then copies the rows out and back
through advanced indexing: ~1 ms. Here ``np.unpackbits`` over the words' bytes (little-endian:
byte ``4w + j`` bit ``b`` is token ``32w + 8j + b``, the reference's bit order) gives one byte a
token, and ``np.putmask`` writes ``-inf`` into each listed row in place: 0.17 against 1.3 ms
for 5 rows with a JSON-like mask (runs of allowed and banned tokens; thread CPU time, one
Zen 4 core), 0.07 against 0.18 ms for one row. (A random mask costs the putmask ~0.18 ms a row
in branch misses: 0.95 against 1.3 ms.)

Taken on float32, 2-D, contiguous CPU logits without autograd, with distinct ``rows``
(the scheduler's case); anything else goes to the reference (which, for a repeated row, keeps
the last mask alone: not reproduced here).
"""

from __future__ import annotations

import sys

import numpy as np
import torch

from ..reference.token_bitmask import apply_token_bitmask_ref, check_bitmask_args

_NUMPY_DTYPES = (torch.float32,)


def apply_token_bitmask_cpu(
    logits: torch.Tensor, bitmask: torch.Tensor, rows: torch.Tensor | None = None
) -> None:
    """In place: ``logits[rows[r], t] = -inf`` where bit t of ``bitmask[r]`` is clear (as the
    reference; see module doc)."""
    check_bitmask_args(logits, bitmask, rows)
    if (logits.device.type != "cpu" or logits.dtype not in _NUMPY_DTYPES
            or not logits.is_contiguous() or logits.requires_grad
            or not bitmask.is_contiguous() or sys.byteorder != "little"):
        apply_token_bitmask_ref(logits, bitmask, rows)
        return
    order = range(logits.shape[0]) if rows is None else rows.tolist()
    if rows is not None and len(set(order)) != len(order):
        apply_token_bitmask_ref(logits, bitmask, rows)
        return
    vocab = logits.shape[1]
    out = logits.numpy()
    # uint8 [R, words * 32], 1 = allowed; the reference ignores the bits past the vocabulary
    allowed = np.unpackbits(bitmask.numpy().view(np.uint8), axis=1, bitorder="little")
    banned = allowed[:, :vocab] == 0
    for r, row in enumerate(order):
        np.putmask(out[row], banned[r], -np.inf)
