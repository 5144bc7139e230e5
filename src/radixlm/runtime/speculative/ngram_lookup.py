"""Prompt lookup: propose the tokens that followed the latest earlier occurrence of the
sequence's suffix, for suffixes of ``max_n`` down to ``min_n`` tokens (the longest match wins).

The index is incremental: each call indexes only the positions appended since the last one, so
a decode step costs ``O(new tokens x window sizes)`` dictionary updates, not a scan of the
prompt. A sequence that shrank (retokenized) is indexed again from scratch. Whatever the index
proposes is only a guess: the model verifies every draft, so a stale entry costs acceptance,
never exactness.
"""

from __future__ import annotations

from collections.abc import Sequence


class NgramLookup:
    """The n-gram index of one growing token sequence (see module doc)."""

    def __init__(self, min_n: int, max_n: int) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got {min_n}, {max_n}")
        self.min_n, self.max_n = min_n, max_n
        # n -> n-gram -> the position just after its latest occurrence
        self._maps: dict[int, dict[tuple[int, ...], int]] = {n: {} for n in
                                                             range(min_n, max_n + 1)}
        self._indexed = 0  # n-grams ending at positions <= this are indexed

    def _sync(self, ids: Sequence[int]) -> None:
        """Index the n-grams ending at positions up to ``len(ids) - 1``: every occurrence but
        the suffix itself, so a match always has at least one token after it."""
        end = len(ids) - 1
        if end < self._indexed:  # the sequence shrank: its tail changed
            for m in self._maps.values():
                m.clear()
            self._indexed = 0
        lo = max(self._indexed + 1, self.min_n)
        if lo > end:
            return
        window = list(ids[max(lo - self.max_n, 0) : end])  # tokens of every new n-gram
        base = max(lo - self.max_n, 0)
        for p in range(lo, end + 1):
            for n, m in self._maps.items():
                if p >= n:
                    m[tuple(window[p - n - base : p - base])] = p
        self._indexed = end

    def propose(self, ids: Sequence[int], want: int, tail: Sequence[int] = ()) -> list[int]:
        """Up to ``want`` tokens to follow ``ids + tail`` (``tail``: drafts already chosen,
        not indexed), copied from ``ids`` after the latest earlier occurrence of the longest
        suffix that occurred before; [] when none did."""
        return self.match(ids, want, tail)[0]

    def match(self, ids: Sequence[int], want: int, tail: Sequence[int] = ()
              ) -> tuple[list[int], int]:
        """:meth:`propose`'s tokens and the length of the suffix they matched (0: none)."""
        if want <= 0:
            return [], 0
        self._sync(ids)
        ctx = list(ids[-self.max_n :]) + list(tail)
        for n in range(min(self.max_n, len(ctx)), self.min_n - 1, -1):
            p = self._maps[n].get(tuple(ctx[-n:]))
            if p is not None:
                return list(ids[p : p + want]), n
        return [], 0
