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
    if len(q) == 1 or p == q:
        return p
    # in the order of the pairs (x, y) with a non-empty x & y, x in p outer and y in q inner,
    # but each x's scan of q stops once x is used up (the parts of q are disjoint, so
    # ``rest & y == x & y`` for every y not yet passed): a fine p met with a fine q cost
    # |p| * |q| big-int ANDs, a third of a compile's time (Handwritten allany15)
    out = []
    for x in p:
        for y in q:
            z = x & y
            if z:
                out.append(z)
                x ^= z
                if not x:
                    break
    return tuple(out)


def part_index(q: tuple[int, ...]) -> list[int]:
    """Byte -> the index of its part in the partition ``q`` (for :func:`refine_indexed`)."""
    index = [0] * 256
    for i, y in enumerate(q):
        while y:
            low = y & -y
            index[low.bit_length() - 1] = i
            y ^= low
    return index


def refine_indexed(p: tuple[int, ...], q: tuple[int, ...], index: list[int]
                   ) -> tuple[int, ...]:
    """:func:`refine` (the same parts in the same order) given ``index = part_index(q)``:
    each part of ``p`` finds the part of ``q`` holding its lowest byte at once, and most
    lie wholly inside it (a fold over an intersection's members splits one part in 15 or
    so), where :func:`refine` scanned ``q`` until it was used up."""
    if len(p) == 1:
        return q
    if len(q) == 1:
        return p
    out = []
    for x in p:
        i = index[(x & -x).bit_length() - 1]
        z = x & q[i]
        if z == x:
            out.append(x)
            continue
        pieces = []  # x's parts in q's order, as refine lists them
        while x:
            i = index[(x & -x).bit_length() - 1]
            z = x & q[i]
            pieces.append((i, z))
            x ^= z
        pieces.sort()
        out.extend([z for _, z in pieces])
    return tuple(out)
