"""``uniqueItems`` over a small finite item domain, exactly.

When every item must be one of a few values (an ``enum``/``const``, or a type with finitely
many values such as ``boolean``), "no two items equal" is regular: the array is a path
through the subsets of values already used. The regex is a DAG over those subsets (built
once each), so its size is the number of subsets reachable within ``maxItems``, bounded by
:data:`MAX_SUBSETS`; larger domains are refused by name. Equality is JSON Schema's (1 and
1.0 are one value, ``true`` and 1 are two), and distinct values have disjoint spellings.
"""

from __future__ import annotations

from math import comb
from typing import Any

from ...regex import tree as ra
from .context import SchemaContext
from .facts import Sub
from .keywords import facts_of

MAX_SUBSETS = 4096
_FINITE_TYPES = {frozenset({"boolean"}): [True, False], frozenset({"null"}): [None]}


def _canon(value: Any) -> Any:
    """A hashable key equal for JSON-Schema-equal values."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value)  # 1 == 1.0 and hash(1) == hash(1.0)
    if isinstance(value, list):
        return ("array", tuple(_canon(v) for v in value))
    if isinstance(value, dict):
        return ("object", frozenset((k, _canon(v)) for k, v in value.items()))
    return (type(value).__name__, value)


def finite_domain(c: SchemaContext, item: Sub) -> list[Any] | None:
    """The distinct values an item may take, when finitely many are declared (else None)."""
    f = facts_of(c, item)
    if f.unsat:
        return []
    if f.enum is not None:
        candidates = f.enum
    elif f.types in _FINITE_TYPES:
        candidates = _FINITE_TYPES[f.types]
    else:
        return None
    out: dict[Any, Any] = {}
    for v in candidates:
        if c.document.valid_in(v, f.sources):
            out.setdefault(_canon(v), v)
    return list(out.values())


def unique_array_node(c: SchemaContext, values: list[Any], lo: int, hi: int | None
                      ) -> ra.Node | None:
    """Arrays of ``lo..hi`` pairwise distinct items from ``values`` (None: too many
    subsets to build)."""
    n = len(values)
    top = n if hi is None else min(hi, n)
    if sum(comb(n, k) for k in range(top + 1)) > MAX_SUBSETS:
        return None
    items = [c.literal(v) for v in values]
    sep, ws = c.separator(), c.ws
    memo: dict[int, ra.Node] = {}

    def tail(used: int, count: int) -> ra.Node:  # the rest after ``count`` items in ``used``
        hit = memo.get(used)
        if hit is not None:
            return hit
        options = [ra.EPSILON] if count >= lo else []
        if count < top:
            options += [ra.seq(sep, items[i], tail(used | 1 << i, count + 1))
                        for i in range(n) if not used >> i & 1]
        node = ra.alt(*options)
        memo[used] = node
        return node

    options = [ra.seq(ra.lit("["), ws, ra.lit("]"))] if lo == 0 else []
    if top >= 1:
        first = ra.alt(*(ra.seq(items[i], tail(1 << i, 1)) for i in range(n)))
        if first is not ra.EMPTY:
            options.append(ra.seq(ra.lit("["), ws, first, ws, ra.lit("]")))
    return ra.alt(*options)
