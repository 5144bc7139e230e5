"""Interned byte terms: the node type :mod:`derivatives` builds and :mod:`liveness` searches.

A term is created only by a :class:`derivatives.TermBuilder` (hash-consed there, so two terms
built from the same parts are the same object); it carries the caches its builder and the
liveness search fill in (derivatives by byte, byte classes, liveness, clamped form, estimate).
"""

from __future__ import annotations

FULL_MASK = (1 << 256) - 1

EMPTY_K, EPS_K, BYTES_K, CAT_K, ALT_K, REP_K, AND_K, NOT_K, LAZY_K, AUTO_K = range(10)


class Term:
    """One interned term. ``args`` by kind: BYTES mask (int), CAT (a, b), ALT/AND tuple of
    terms sorted by uid, REP (a, lo, hi) with hi -1 for unbounded, NOT (a,), LAZY a regex
    tree node not lowered yet (expanded one level when first needed), AUTO (machine, state)
    of an :class:`..regex.tree.AsciiMachine` (every state live)."""

    __slots__ = ("kind", "args", "nullable", "uid", "boolean", "classes", "deriv", "live",
                 "clamped", "forced", "bigcount", "estimate")

    def __init__(self, kind: int, args: object, nullable: bool, uid: int, boolean: bool,
                 bigcount: int = 0) -> None:
        self.kind = kind
        self.bigcount = bigcount  # largest repetition bound inside (clamp skips small ones)
        self.args = args
        self.nullable = nullable
        self.uid = uid
        self.boolean = boolean  # contains AND/NOT: liveness needs a search
        self.classes: tuple[int, ...] | None = None
        self.deriv: dict[int, Term] = {}
        self.live: bool | None = None
        self.clamped: tuple[int, Term] | None = None
        self.forced: Term | None = None
        self.estimate: int | None = None  # bytes still needed, guessed (search order)

    def __repr__(self) -> str:
        return f"Term#{self.uid}(kind={self.kind})"


def refine(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """Common refinement of two partitions of the byte alphabet (as bit masks)."""
    if len(p) == 1:
        return q
    if len(q) == 1:
        return p
    return tuple([z for x in p for y in q if (z := x & y)])
