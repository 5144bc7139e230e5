"""Arrays of a schema: positional items, the rest, item counts and ``contains``."""

from __future__ import annotations

from ...regex import tree as ra
from .contains import contains_body
from .context import SchemaContext
from .facts import ArrayPart, Facts, Sub
from .unique_items import MAX_SUBSETS, finite_domain, unique_array_node


def _list_body(c: SchemaContext, prefix: list[ra.Node], rest: ra.Node, lo: int,
               hi: int | None) -> ra.Node:
    """Items (at least one) separated by commas: prefix items in order, then rest items."""
    sep = c.separator()
    n_prefix = len(prefix)

    def tail(i: int) -> ra.Node:  # items i.. each preceded by a separator
        if hi is not None and i >= hi:
            return ra.EPSILON
        if i < n_prefix:
            item = ra.seq(sep, prefix[i], tail(i + 1))
            return item if i < lo else ra.opt(item)
        k_hi = None if hi is None else hi - n_prefix
        if rest is ra.EMPTY:
            return ra.EPSILON if max(0, lo - n_prefix) == 0 else ra.EMPTY
        return ra.repeat(ra.seq(sep, rest), max(0, lo - n_prefix), k_hi)

    first = prefix[0] if prefix else rest
    if first is ra.EMPTY:
        return ra.EMPTY
    if prefix:
        return ra.seq(first, tail(1))
    more_hi = None if hi is None else hi - 1
    return ra.seq(first, ra.repeat(ra.seq(sep, rest), max(lo - 1, 0), more_hi))


def array_node(c: SchemaContext, f: Facts) -> ra.Node:
    """Regex tree of the arrays allowed by ``f``."""
    parts = f.arrays or [ArrayPart([], None)]
    n_prefix = max(len(p.prefix) for p in parts)
    lo, hi = f.min_items, f.max_items
    cap = c.options.max_array_items
    if cap is not None:
        hi = max(lo, cap if hi is None else min(hi, cap))
    if f.unique and (hi is None or hi > 1):
        node = _unique_array(c, f, parts, n_prefix, lo, hi)
        if node is not None and f.contains and node is not ra.EMPTY:
            item = c.compile_sub(c.merge_subs([p.rest for p in parts]))
            return _with_contains(c, f, parts, 0, item, node)
        if node is not None:
            return node

    def subs_at(i: int) -> list[Sub | None]:
        return [p.prefix[i] if i < len(p.prefix) else p.rest for p in parts]

    prefix: list[ra.Node] = []
    for i in range(n_prefix):
        if hi is not None and i >= hi:
            break
        node = c.compile_sub(c.merge_subs(subs_at(i)))
        if node is ra.EMPTY:
            hi = i if hi is None else min(hi, i)
            break
        prefix.append(node)
    rest = ra.EMPTY
    if len(prefix) == n_prefix and (hi is None or hi > n_prefix):
        rest = c.compile_sub(c.merge_subs([p.rest for p in parts]))
    if rest is ra.EMPTY:
        hi = len(prefix) if hi is None else min(hi, len(prefix))
    if hi is not None and lo > hi:
        return ra.EMPTY
    ws = c.ws
    if f.contains and not prefix:
        body = _contains_body(c, f, parts, rest, lo, hi)
        if body is not None:
            return ra.seq(ra.lit("["), ws, body, ws, ra.lit("]"))
    options = []
    if lo == 0:
        options.append(ra.seq(ra.lit("["), ws, ra.lit("]")))
    if hi is None or hi >= 1:
        body = _list_body(c, prefix, rest, lo, hi)
        if body is not ra.EMPTY:
            options.append(ra.seq(ra.lit("["), ws, body, ws, ra.lit("]")))
    node = ra.alt(*options)
    if f.contains and node is not ra.EMPTY:
        node = _with_contains(c, f, parts, n_prefix, rest, node)
    return node


def _unique_array(c: SchemaContext, f: Facts, parts: list[ArrayPart], n_prefix: int,
                  lo: int, hi: int | None) -> ra.Node | None:
    """Distinct items from a small finite domain (None, and reported, otherwise)."""
    values = None if n_prefix else finite_domain(c, c.merge_subs([p.rest for p in parts]))
    node = None if values is None else unique_array_node(c, values, lo, hi)
    if node is None:
        c.unsupported("uniqueItems", "uniqueness of array items is not a regular language "
                                     f"(beyond item domains of a few values, at most "
                                     f"{MAX_SUBSETS} subsets, without positional items)")
    return node


def _contains_body(c: SchemaContext, f: Facts, parts: list[ArrayPart], rest: ra.Node,
                   lo: int, hi: int | None) -> ra.Node | None:
    """The list body of an array with ``contains`` (see :mod:`.contains`); None past its caps.
    A hit merges the item schema with the ``contains`` schemas it claims."""
    rests = [p.rest for p in parts]

    def hit(claimed: frozenset[int]) -> ra.Node:
        return c.compile_sub(c.merge_subs(rests + [f.contains[i] for i in sorted(claimed)]))

    if rest is ra.EMPTY:
        return ra.EMPTY  # no item at all, so none that matches
    return contains_body(c.separator(), rest, hit, len(f.contains), lo, hi)


def _with_contains(c: SchemaContext, f: Facts, parts: list[ArrayPart], n_prefix: int,
                   rest: ra.Node, node: ra.Node) -> ra.Node:
    if n_prefix:
        c.unsupported("contains", "contains together with positional items")
        return node
    sep, ws = c.separator(), c.ws
    require = []
    for sub in f.contains:
        hit = c.compile_sub(c.merge_subs([p.rest for p in parts] + [sub]))
        if hit is ra.EMPTY:
            return ra.EMPTY
        require.append(ra.seq(ra.lit("["), ws, ra.star(ra.seq(rest, sep)), hit,
                              ra.star(ra.seq(sep, rest)), ws, ra.lit("]")))
    # arrays are self-delimiting: an empty terminator pins the lookahead to the array's end
    return ra.constrained(node, require, terminator="")
