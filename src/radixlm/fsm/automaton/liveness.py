"""Liveness of byte terms with intersections and complements: a best-first search.

A term without ``AND``/``NOT`` is live unless it is ``EMPTY``; one with them is live when some
chain of derivatives reaches a nullable term, which only a search can tell. The search is a
mixin of :class:`derivatives.TermBuilder` (it walks the builder's derivatives and caches its
verdicts on the terms), kept here so that the derivative algebra and the search stay apart.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..regex import tree as ra
from .term import ALT_K, AND_K, BYTES_K, CAT_K, EMPTY_K, EPS_K, LAZY_K, REP_K, Term


class LivenessBudgetError(RuntimeError):
    """Deciding whether an intersection/complement term is satisfiable took too many states."""


class LivenessSearch:
    """``is_live`` and the search behind it, for a builder that provides derivatives.

    The host class sets ``liveness_budget``, ``deadline``, ``_visited``, ``_expanded``,
    ``_reps`` (an empty dict) and ``empty`` and implements ``derivative``, ``classes`` and
    ``force`` (see :class:`derivatives.TermBuilder`).
    """

    liveness_budget: int
    deadline: Callable[[], None] | None
    _reps: dict[int, tuple[list[int], tuple[int, ...]]]  # _ordered_reps by partition id
    _visited: int
    _expanded: int
    empty: Term

    if TYPE_CHECKING:  # provided by the host class
        def derivative(self, t: Term, byte: int) -> Term: ...

        def classes(self, t: Term) -> tuple[int, ...]: ...

        def force(self, t: Term) -> Term: ...

        def lower(self, node: ra.Node) -> Term: ...

    def is_live(self, t: Term) -> bool:
        """Whether ``t`` matches at least one byte string."""
        if t.live is not None:
            return t.live
        kind = t.kind
        if not t.boolean:
            live = kind != EMPTY_K
        elif kind == CAT_K:
            live = True
            node = t
            while live and node.kind == CAT_K and node.live is None:
                live = self.is_live(node.args[0])
                node = node.args[1]
            live = live and self.is_live(node)
        elif kind == ALT_K:
            live = any(m.live or not m.boolean for m in t.args) or self._alternation_live(t)
        elif kind == REP_K:
            live = t.args[1] == 0 or self.is_live(t.args[0])
        elif kind == LAZY_K:
            live = self.is_live(self.force(t))
        else:
            live = self._search_live(t, self.liveness_budget)
            if live is None:
                raise self._budget_error()
        t.live = live
        return live

    def _budget_error(self) -> LivenessBudgetError:
        return LivenessBudgetError(f"deciding whether a pattern intersection is satisfiable "
                                   f"needed more than {self.liveness_budget} states")

    def _alternation_live(self, t: Term) -> bool:
        """Whether some member of an alternation of boolean terms is live.

        Members are searched in rounds of growing budgets (most promising first), so a live
        member with a short witness is found before a dead one's whole closure is explored
        (a distributed anyOf lists many unsatisfiable combinations). The rounds share one
        budget: the error is raised once they have visited ``liveness_budget`` states in all.
        """
        pending = sorted((m for m in t.args if m.live is None), key=self.search_estimate)
        left, budget = self.liveness_budget, _FIRST_ROUND_STATES
        while pending:
            undecided = []
            for m in pending:
                if left <= 0:
                    raise self._budget_error()
                before = self._visited
                found = self._bounded_live(m, budget, before + left)
                left -= self._visited - before
                if found:
                    return True
                if found is None:
                    undecided.append(m)
            pending, budget = undecided, budget * 8
        return False

    def _bounded_live(self, t: Term, budget: int, stop_at: int) -> bool | None:
        """:meth:`is_live` with each search given at most ``budget`` states and all of them
        together stopping when ``_visited`` reaches ``stop_at``; None: undecided.

        Structure first: a concatenation is live when every part is, an alternation when
        some member is, so only the intersections and complements inside are searched, each
        on its own (an object's member with a constrained key is a few small searches, not
        one over the whole rest of the object, whose every step derives all of it)."""
        if t.live is not None:
            return t.live
        if t.nullable or not t.boolean:
            live: bool | None = t.nullable or t.kind != EMPTY_K
        elif t.kind == LAZY_K:
            live = self._bounded_live(self.force(t), budget, stop_at)
        elif t.kind == CAT_K:
            live = True
            node = t
            while node.kind == CAT_K and node.live is None:
                part = self._bounded_live(node.args[0], budget, stop_at)
                if part is False:
                    break
                live = live and part
                node = node.args[1]
            else:
                part = self._bounded_live(node, budget, stop_at)
            live = False if part is False else live and part
        elif t.kind == ALT_K:
            live = False
            for m in sorted(t.args, key=self.search_estimate):
                found = self._bounded_live(m, budget, stop_at)
                if found:
                    live = True
                    break
                if found is None:
                    live = None
        elif t.kind == REP_K:
            live = self._bounded_live(t.args[0], budget, stop_at)
        else:  # an intersection or a complement
            allowed = min(budget, stop_at - self._visited)
            live = self._search_live(t, allowed) if allowed > 0 else None
        if live is not None:
            t.live = live
        return live

    def _search_live(self, t: Term, budget: int) -> bool | None:
        """Best-first search over derivatives for a nullable term.

        Terms are expanded in order of :meth:`search_estimate` (the bytes each still needs,
        an intersection counting every member's), deepest first among equals, so the search
        heads for a short completion instead of wandering into free-form values
        (a depth-first walk took 10-20 s on objects that must hold one named key). Every term
        on the path to a nullable term is marked live, so later queries along it are free.
        A search that finds none has explored everything reachable from ``t``: every term it
        saw is dead, and is marked so (the next search reaching one stops there at once).
        None: undecided after ``budget`` states (nothing is marked).
        """
        parents: dict[int, Term | None] = {t.uid: None}
        visited = [t]  # the terms in ``parents``
        heap = [(self.search_estimate(t), 0, 0, t)]
        pushed = 0
        while heap:
            _, depth, _, u = heapq.heappop(heap)
            self._expanded += 1  # counted across searches: an alternation runs many small ones
            if self.deadline is not None and not self._expanded % _DEADLINE_EVERY:
                self.deadline()  # out of time: refused now, not after the whole budget
            if u.nullable:
                self._mark_path_live(u, parents)
                return True
            for byte in self._ordered_reps(u):
                v = self.derivative(u, byte)
                if v.uid in parents or v is self.empty:
                    continue
                if not v.boolean or v.live is not None:
                    if self.is_live(v):
                        self._mark_path_live(u, parents)
                        return True
                    continue
                parents[v.uid] = u
                visited.append(v)
                self._visited += 1
                if len(parents) > budget:
                    return None
                pushed += 1
                heapq.heappush(heap, (self.search_estimate(v), depth - 1, pushed, v))
        for w in visited:  # the whole closure was explored: no nullable term reachable
            w.live = False
        return False

    @staticmethod
    def _mark_path_live(u: Term, parents: dict[int, Term | None]) -> None:
        node: Term | None = u
        while node is not None:
            node.live = True
            node = parents[node.uid]

    def search_estimate(self, t: Term) -> int:
        """How many bytes ``t`` still needs to be accepted, as the search's guess: exact (the
        shortest match) without AND/NOT; an intersection sums its members' (each has to be
        brought to acceptance: progress on any of them counts), a complement needs one byte
        when its operand matches the empty string. Only orders the search, never decides."""
        if t.estimate is not None:
            return t.estimate
        kind = t.kind
        if t.nullable or kind == EPS_K:
            out = 0
        elif kind == BYTES_K:
            out = 1
        elif kind == CAT_K:
            out, node = 0, t
            while node.kind == CAT_K and node.estimate is None:
                out += self.search_estimate(node.args[0])
                node = node.args[1]
            out += self.search_estimate(node)
        elif kind == ALT_K:
            out = min(self.search_estimate(m) for m in t.args)
        elif kind == AND_K:
            out = sum(self.search_estimate(m) for m in t.args)
        elif kind == REP_K:
            out = t.args[1] * self.search_estimate(t.args[0])
        elif kind == LAZY_K:
            out = self._lazy_estimate(t)
        else:  # NOT of a nullable operand, AUTO (not nullable: one byte at least), EMPTY
            out = 1
        t.estimate = out
        return out

    def _lazy_estimate(self, t: Term) -> int:
        """``search_estimate(force(t))`` of a non-nullable LAZY term, read off its regex node
        and its children's terms without building the expansion: an alternation's members
        are all estimated before the search (to order them), and forcing every term down to
        the nullable frontier cost more than the search itself. Mirrors what ``force`` would
        build: a sequence or repeat with an EMPTY part is EMPTY (estimate 1), an alternation
        drops EMPTY options (all EMPTY: 1)."""
        if t.forced is not None:
            return self.search_estimate(t.forced)
        node = t.args
        if isinstance(node, ra.Seq):
            out = 0
            for item in node.items:
                part = self.lower(item)
                if part is self.empty:
                    return 1
                out += self.search_estimate(part)
            return out
        if isinstance(node, ra.Alt):
            live = [p for p in (self.lower(o) for o in node.options) if p is not self.empty]
            return min((self.search_estimate(p) for p in live), default=1)
        if isinstance(node, ra.Repeat):  # not nullable: lo > 0
            part = self.lower(node.item)
            return 1 if part is self.empty else node.lo * self.search_estimate(part)
        # an intersection (rare): its members are deduplicated terms, build it
        return self.search_estimate(self.force(t))

    def _ordered_reps(self, t: Term) -> list[int]:
        """One byte per derivative class, the smallest class last (popped first); memoised
        by the partition's identity (terms share their partitions: a search expands
        thousands of terms over a few hundred)."""
        classes = self.classes(t)
        hit = self._reps.get(id(classes))
        if hit is not None:
            return hit[0]
        ordered = sorted(classes, key=lambda m: -m.bit_count())
        reps = [(m & -m).bit_length() - 1 for m in ordered]
        self._reps[id(classes)] = (reps, classes)  # the partition kept alive: its id stays
        return reps


_FIRST_ROUND_STATES = 256  # an alternation's members are first searched this far each
_DEADLINE_EVERY = 32  # search states expanded between two deadline checks
