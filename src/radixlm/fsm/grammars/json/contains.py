"""``contains`` without intersection: the list body of arrays in which each of a few schemas
is matched by some item, spelled with concatenation and alternation only.

The body is read left to right with the set of ``contains`` schemas covered so far and the
number of items so far. Each item either claims nothing (any item of the array) or claims a
non-empty set ``T`` of the schemas not covered yet (an item of the array's item schema merged,
at the schema level, with every schema in ``T``). Claiming is a choice and an item that
claims nothing could be any item, so the body matches exactly the arrays in which every
schema is matched by some item, with the item count in range. Without an intersection no
liveness search is needed (every term but EMPTY is live); intersecting two container grammars
ran past the liveness budget on real schemas.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import combinations

from ...regex import tree as ra

MAX_CONTAINS = 3  # schemas: 2**k - 1 merged item schemas, (2**k) * counts body states
MAX_COUNTED = 64  # item counts tracked exactly up to this many (beyond: intersect)


def claims(k: int, covered: frozenset[int]) -> Iterator[frozenset[int]]:
    """Non-empty sets of the schemas (numbered 0..k-1) not covered yet."""
    left = sorted(set(range(k)) - covered)
    for size in range(1, len(left) + 1):
        for picked in combinations(left, size):
            yield frozenset(picked)


def contains_body(sep: ra.Node, rest: ra.Node, hit: Callable[[frozenset[int]], ra.Node],
                  k: int, lo: int, hi: int | None) -> ra.Node | None:
    """Items separated by ``sep`` (at least one), each a ``rest``; for every schema i < k
    some item is a ``hit({..., i, ...})`` (an item of each schema in the set, which must also
    be a ``rest``); between ``lo`` and ``hi`` items. None when ``k`` or the count to track
    is beyond the caps (the caller intersects instead)."""
    top = max(lo, 1) if hi is None else hi  # counts saturate at top when unbounded
    if k > MAX_CONTAINS or top > MAX_COUNTED:
        return None
    full = frozenset(range(k))
    hits = {t: hit(t) for size in range(1, k + 1) for t in map(frozenset,
                                                             combinations(range(k), size))}
    memo: dict[tuple[frozenset[int], int], ra.Node] = {}

    def item(node: ra.Node, n: int) -> ra.Node:
        return node if n == 0 else ra.seq(sep, node)

    def body(covered: frozenset[int], n: int) -> ra.Node:
        # the rest of the body after n items that covered the schemas ``covered``
        key = (covered, n)
        if key in memo:
            return memo[key]
        if hi is None and n == top:  # the count is satisfied: any items, then the hits
            loop = ra.star(ra.seq(sep, rest))
            out = loop if covered == full else ra.seq(loop, ra.alt(*(
                ra.seq(sep, hits[t], body(covered | t, n)) for t in claims(k, covered))))
        else:
            options = [ra.EPSILON] if covered == full and n >= lo else []
            if hi is None or n < hi:
                options.append(ra.seq(item(rest, n), body(covered, n + 1)))
                options += [ra.seq(item(hits[t], n), body(covered | t, n + 1))
                            for t in claims(k, covered)]
            out = ra.alt(*options)
        memo[key] = out
        return out

    return body(frozenset(), 0)
