"""The vocabulary's tokens byte by byte, one column per byte position, each only as long as
the tokens that reach it (a ragged ``[max_len, n]`` byte matrix).

Tokens sorted longest first: the tokens with a byte ``i`` are the first ``count(len > i)``, so
column ``i`` holds just those. SmolLM2's 49k tokens are ~0.3 MB of bytes where the full
``uint8 [max_len, n]`` matrix, mostly padding, was 3.8 MB (the scheduler's RSS, issue 40).
"""

from __future__ import annotations

from typing import Any

import numpy as np


class ByteColumns:
    """``cols[i]``: byte ``i`` of each of the tokens longer than ``i`` (``uint8``, in their
    order); ``cols[a:b, row]``: bytes ``a..b`` of the token at ``row``, as the full matrix
    (with zero past the token's end) would give them."""

    def __init__(self, flat: np.ndarray, lengths: np.ndarray) -> None:
        """``flat``: the tokens' bytes end to end (``uint8``), ``lengths`` their lengths,
        descending (``int32``)."""
        starts = np.cumsum(lengths, dtype=np.int64) - lengths
        max_len = int(lengths[0]) if lengths.size else 1
        neg = -lengths
        self.rows: list[np.ndarray] = []
        for i in range(max_len):
            reach = int(np.searchsorted(neg, -i, side="left"))  # tokens longer than i
            self.rows.append(flat[starts[:reach] + i])
        self.width = int(lengths.size)

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, key: Any) -> np.ndarray:
        if isinstance(key, tuple):
            positions, row = key
            picked = [r[row] if row < r.size else 0 for r in self.rows[positions]]
            return np.array(picked, dtype=np.uint8)
        return self.rows[key]

    @property
    def nbytes(self) -> int:
        return sum(r.nbytes for r in self.rows)
