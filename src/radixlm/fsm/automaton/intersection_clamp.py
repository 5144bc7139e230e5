"""Clamping a length counter inside an intersection, where that is provably exact.

A JSON string with a pattern (or a format) and ``maxLength`` is the intersection
``A ∩ x·u{0,h}``: ``A`` the encoded pattern, ``u`` one JSON character, ``x`` what is left of
the current character. Every position of the counter is a state of its own, and the plain
clamp (:meth:`derivatives.TermBuilder.clamp`) leaves intersections alone, so such a string has
a mask per position: at 49k tokens each is a cold walk and dozens of automaton rows.

The counter is dropped, and the state's mask read off ``A`` alone, when two facts hold:

* ``L(A) ⊆ L(x·u*)``: checked by walking ``A`` and ``x·u*`` together (a product of their
  derivatives; both are free of intersections, so a term is dead exactly when it is EMPTY);
* ``h >= reach + R``, where ``R`` is the longest of the shortest completions over every
  derivative of ``A`` (from any state ``A`` can reach, some accepted end is at most ``R`` bytes
  away), measured over the same walk.

Then for any token ``w`` of at most ``reach`` bytes: if ``w`` leads ``A`` to a live term, its
shortest completion ``s`` keeps ``w s`` in ``A``, hence in ``x·u*``, with at most
``|w| + |s| <= reach + R <= h`` characters (each at least one byte): in ``x·u{0,h}`` too. So the
intersection and ``A`` allow the same tokens and accept the same prefixes of at most ``reach``
bytes, which is what a mask key needs (see ``clamp``). The walk costs about one automaton row
per pair of terms, counted in the builder's work steps, within ``clamp_budget`` pairs; past
it (or when a fact fails) the intersection stays exact and unclamped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .term import AND_K, CAT_K, LAZY_K, REP_K, Term, refine

if TYPE_CHECKING:
    from collections.abc import Iterable


class IntersectionClamp:
    """``clamp_intersection`` for a builder that provides derivatives (a mixin of
    :class:`derivatives.TermBuilder`, as :class:`liveness.LivenessSearch` is).

    The host sets ``clamp_budget`` and ``_radii`` and implements the term algebra below."""

    clamp_budget: int
    # (A uid, x·u* uid) -> R, or None where a fact failed or the budget ran out; every pair
    # the walk from a root met gets the root's verdict (a derivative's pairs are a subset)
    _radii: dict[tuple[int, int], int | None]
    deadline: Callable[[], None] | None
    empty: Term
    eps: Term

    if TYPE_CHECKING:  # provided by the host class
        def derivative(self, t: Term, byte: int) -> Term: ...

        def classes(self, t: Term) -> tuple[int, ...]: ...

        def force(self, t: Term) -> Term: ...

        def cat(self, a: Term, b: Term) -> Term: ...

        def rep(self, a: Term, lo: int, hi: int) -> Term: ...

        def clamp(self, t: Term, reach: int) -> Term: ...

    def clamp_intersection(self, t: Term, reach: int) -> Term:
        """``t`` (an intersection) clamped at ``reach``: its pattern member alone when the
        counter cannot matter within ``reach`` bytes (see the module), else ``t``."""
        split = self._counted_pair(t)
        if split is None:
            return t
        a, x, u, hi = split
        if hi <= reach:
            return t  # the counter may end within a token: exact it stays
        radius = self._completion_radius(a, self.cat(x, self.rep(u, 0, -1)))
        if radius is None or hi < reach + radius:
            return t
        return self.clamp(a, reach)

    def _counted_pair(self, t: Term) -> tuple[Term, Term, Term, int] | None:
        """(A, x, u, h) when ``t`` is ``A ∩ x·u{0,h}`` with A, x and u free of intersections,
        u not nullable and h bounded; None otherwise."""
        if t.kind != AND_K or len(t.args) != 2:
            return None
        for c, a in (t.args, t.args[::-1]):
            if a.boolean:
                continue
            c = self.force(c) if c.kind == LAZY_K else c
            x, r = (c.args if c.kind == CAT_K else (self.eps, c))
            if r.kind != REP_K or x.boolean:
                continue
            u, lo, hi = r.args
            if lo == 0 and hi >= 0 and not u.nullable and not u.boolean:
                return a, x, u, hi
        return None

    def _completion_radius(self, a: Term, v: Term) -> int | None:
        """R of the module when ``L(a) ⊆ L(v)`` (checked over their joint derivatives), else
        None; None too past ``clamp_budget`` pairs. Cached per pair: every pair the walk met
        gets its verdict (a failed walk's too, so a string whose check fails pays for one
        walk, not one per position)."""
        key = (a.uid, v.uid)
        if key in self._radii:
            return self._radii[key]
        pairs, edges, included = self._joint_walk(a, v)
        radius = _longest_shortest_completion(edges) if included else None
        for pair in pairs:
            self._radii.setdefault(pair, radius)
        return self._radii[key]

    def _joint_walk(self, a: Term, v: Term) -> tuple[
            list[tuple[int, int]], dict[int, tuple[Term, set[int]]], bool]:
        """Walk (a, v) over their joint byte classes: the pairs met, a's derivative graph
        (uid -> (term, successor uids)) and whether every string of ``a`` is in ``v`` (False
        too when the walk stopped at the budget)."""
        seen = {(a.uid, v.uid)}
        order = [(a, v)]
        edges: dict[int, tuple[Term, set[int]]] = {}

        def met() -> list[tuple[int, int]]:
            return [(p.uid, q.uid) for p, q in order]

        for i, (p, q) in enumerate(order):  # grows while iterated: a breadth-first walk
            if self.deadline is not None and not (i + 1) % _DEADLINE_EVERY:
                self.deadline()
            if p.nullable and not q.nullable:
                return met(), edges, False
            out = edges.setdefault(p.uid, (p, set()))[1]
            for byte in _representatives(refine(self.classes(p), self.classes(q))):
                p2 = self.derivative(p, byte)
                if p2 is self.empty:
                    continue
                q2 = self.derivative(q, byte)
                if q2 is self.empty:
                    return met(), edges, False  # a string of ``a`` that ``v`` does not have
                out.add(p2.uid)
                pair = (p2.uid, q2.uid)
                if pair not in seen:
                    if len(seen) >= self.clamp_budget:
                        return met(), edges, False
                    seen.add(pair)
                    order.append((p2, q2))
        return met(), edges, True


def _representatives(masks: Iterable[int]) -> list[int]:
    return [(m & -m).bit_length() - 1 for m in masks]


def _longest_shortest_completion(edges: dict[int, tuple[Term, set[int]]]) -> int | None:
    """The largest, over the graph's terms, of the fewest bytes to a nullable one (None if
    some term reaches none: not possible for live terms, so a guard)."""
    preds: dict[int, list[int]] = {uid: [] for uid in edges}
    for uid, (_, succ) in edges.items():
        for s in succ:
            preds.setdefault(s, []).append(uid)
    frontier = [uid for uid, (term, _) in edges.items() if term.nullable]
    dist = dict.fromkeys(frontier, 0)
    depth = 0
    while frontier:
        depth += 1
        nxt = []
        for uid in frontier:
            for p in preds[uid]:
                if p not in dist:
                    dist[p] = depth
                    nxt.append(p)
        frontier = nxt
    if any(uid not in dist for uid in edges):
        return None
    return max(dist.values(), default=0)


_DEADLINE_EVERY = 64  # pairs walked between two deadline checks
