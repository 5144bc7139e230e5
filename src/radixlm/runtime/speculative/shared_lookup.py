"""Cross-request lookup: the tokens that followed an n-gram in the output of a request that
already finished, for requests whose own prompt and output have no match.

Finished outputs are indexed (with the last ``max_n - 1`` prompt tokens before them, so an
output's first n-grams have their context): every n-gram of ``min_n..max_n`` tokens maps to
the up-to-``span`` tokens after its latest occurrence. The table holds at most ``capacity``
n-grams, the least recently written dropped first. Requests in different cache namespaces
never see each other's text: the index is per namespace. Like every draft source it is only a
guess that the model verifies.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


class SharedLookup:
    """The cross-request n-gram table of one scheduler (see module doc)."""

    def __init__(self, min_n: int, max_n: int, span: int, capacity: int = 200_000) -> None:
        if not 1 <= min_n <= max_n:
            raise ValueError(f"need 1 <= min_n <= max_n, got {min_n}, {max_n}")
        self.min_n, self.max_n, self.span, self.capacity = min_n, max_n, span, capacity
        # (namespace, n-gram) -> the tokens that followed it
        self._table: OrderedDict[tuple[str, tuple[int, ...]], tuple[int, ...]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._table)

    def add(self, namespace: str, ids: Sequence[int], prompt_len: int) -> None:
        """Index the output of a finished request (``ids``: prompt then output)."""
        start = max(prompt_len - self.max_n + 1, 0)
        seq = list(ids[start:])
        first_out = prompt_len - start  # index in seq of the first output token
        table = self._table
        for p in range(max(first_out, 1), len(seq)):  # n-grams ending before seq[p]
            follow = tuple(seq[p : p + self.span])
            for n in range(self.min_n, min(self.max_n, p) + 1):
                key = (namespace, tuple(seq[p - n : p]))
                table[key] = follow
                table.move_to_end(key)
        while len(table) > self.capacity:
            table.popitem(last=False)

    def propose(self, namespace: str, ctx: Sequence[int], want: int) -> list[int]:
        """Up to ``want`` tokens that followed the longest suffix of ``ctx`` in a finished
        output; [] when none did."""
        if want <= 0 or not self._table:
            return []
        tail = list(ctx[-self.max_n :])
        for n in range(min(self.max_n, len(tail)), self.min_n - 1, -1):
            follow = self._table.get((namespace, tuple(tail[-n:])))
            if follow is not None:
                return list(follow[:want])
        return []
