"""Patterns that name a finite set of keys (``^(cdn|Cdn)$``), read as declared properties.

A ``patternProperties`` entry whose pattern, anchored at both ends, matches only finitely many
strings applies to exactly those keys, so it is the same as ``properties`` entries for them
(on top of any ``properties`` entry of the same name, and of the part's other patterns): no
additional key can match it. This keeps the number of patterns that split additional keys
small (each subset of those patterns is one kind of key).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import product

from ...errors import GrammarError
from ...regex import tree as ra
from ...regex.parser import parse_branches
from .facts import ObjectPart, Sub

MAX_LITERAL_KEYS = 64  # strings a pattern may name to be read as properties


def finite_strings(node: ra.Node, cap: int = MAX_LITERAL_KEYS) -> list[str] | None:
    """Every string ``node`` matches, when there are at most ``cap`` (else None)."""
    if isinstance(node, ra.Chars):
        size = sum(hi - lo + 1 for lo, hi in node.ranges)
        if size > cap:
            return None
        return [chr(cp) for lo, hi in node.ranges for cp in range(lo, hi + 1)]
    if isinstance(node, ra.Seq):
        out = [""]
        for item in node.items:
            tails = finite_strings(item, cap)
            if tails is None or len(out) * len(tails) > cap:
                return None
            out = [a + b for a, b in product(out, tails)]
        return out
    if isinstance(node, ra.Alt):
        out: list[str] = []
        for option in node.options:
            more = finite_strings(option, cap)
            if more is None or len(out) + len(more) > cap:
                return None
            out.extend(m for m in more if m not in out)
        return out
    if isinstance(node, ra.Repeat) and node.hi is not None:
        return finite_strings(ra.seq(*([node.item] * node.hi)) if node.lo == node.hi else
                              ra.alt(*(ra.seq(*([node.item] * n))
                                       for n in range(node.lo, node.hi + 1))), cap)
    return None


def pattern_keys(pattern: str) -> list[str] | None:
    """The keys a ``patternProperties`` pattern matches, when finitely many (search
    semantics: every branch anchored at both ends)."""
    try:
        branches = parse_branches(pattern, "ecma")
    except GrammarError:
        return None  # refused later, by name, where the pattern is compiled
    keys: list[str] = []
    for b in branches:
        if not (b.anchored_start and b.anchored_end):
            return None
        more = finite_strings(b.body)
        if more is None or len(keys) + len(more) > MAX_LITERAL_KEYS:
            return None
        keys.extend(k for k in more if k not in keys)
    return keys


def with_literal_patterns_as_properties(part: ObjectPart,
                                        merge: Callable[[list[Sub]], Sub]) -> ObjectPart:
    """``part`` with its finite patterns moved into ``properties`` (``merge`` conjoins the
    schemas of one key)."""
    properties: dict[str, list[Sub]] = {k: [v] for k, v in part.properties.items()}
    patterns = []
    for pattern, sub in part.patterns:
        keys = pattern_keys(pattern)
        if keys is None:
            patterns.append((pattern, sub))
            continue
        for k in keys:
            properties.setdefault(k, []).append(sub)
    if len(patterns) == len(part.patterns):
        return part
    merged = {k: subs[0] if len(subs) == 1 else merge(subs) for k, subs in properties.items()}
    return ObjectPart(merged, patterns, part.additional)
