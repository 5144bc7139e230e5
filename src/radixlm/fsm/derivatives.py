"""Byte-level regular terms with Brzozowski derivatives: the automaton behind every grammar.

A :class:`TermBuilder` lowers a character-level :mod:`regex_ast` tree to byte terms (character
classes become UTF-8 byte sequences) and computes derivatives on demand. Terms are hash-consed:
two terms built from the same parts are the same object, so a derivative *is* a DFA state and
the DFA can be built lazily, one state at a time (see :mod:`lazy_dfa`). Counted repetition
(``x{0,65535}``) costs nothing until visited, unlike an eagerly determinised automaton.

Alternation is kept in a canonical form (flattened, sorted, de-duplicated), which is what makes
the set of derivatives of a term finite. Intersection and complement (``AND``/``NOT``) are
supported for the few places that need them (string patterns combined with lengths, property
names excluded from additional properties); terms containing them need an explicit liveness
search, every other term is live unless it is ``EMPTY``.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Sequence

from . import regex_ast as ra
from .utf8 import utf8_sequences

FULL_MASK = (1 << 256) - 1

EMPTY_K, EPS_K, BYTES_K, CAT_K, ALT_K, REP_K, AND_K, NOT_K, LAZY_K, AUTO_K = range(10)


class Term:
    """One interned term. ``args`` by kind: BYTES mask (int), CAT (a, b), ALT/AND tuple of
    terms sorted by uid, REP (a, lo, hi) with hi -1 for unbounded, NOT (a,), LAZY a regex
    tree node not lowered yet (expanded one level when first needed), AUTO (machine, state)
    of an :class:`regex_ast.AsciiMachine` (every state live)."""

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


class LivenessBudgetError(RuntimeError):
    """Deciding whether an intersection/complement term is satisfiable took too many states."""


def _refine(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """Common refinement of two partitions of the byte alphabet (as bit masks)."""
    if len(p) == 1:
        return q
    if len(q) == 1:
        return p
    return tuple(x & y for x in p for y in q if x & y)


class TermBuilder:
    """Interns terms, lowers regex trees and computes derivatives; one per grammar."""

    def __init__(self, liveness_budget: int = 50_000) -> None:
        self._intern: dict[tuple, Term] = {}
        self._lowered_keep: list[ra.Node] = []
        self._class_cache: dict[tuple[tuple[int, int], ...], Term] = {}
        self.liveness_budget = liveness_budget
        self._visited = 0  # states the liveness searches have visited, in all
        # called every _DEADLINE_EVERY search states: raises (GrammarBudgetError) once the
        # work this search is part of (a compile, one mask) is out of time; None: no limit
        self.deadline: Callable[[], None] | None = None
        self._expanded = 0  # terms the liveness searches have expanded, in all
        self.empty = self._make(EMPTY_K, None, False, False)
        self.eps = self._make(EPS_K, None, True, False)
        self.empty.live, self.eps.live = False, True

    # -- construction ---------------------------------------------------------------------

    def _make(self, kind: int, args: object, nullable: bool, boolean: bool,
              key: tuple | None = None, bigcount: int = 0) -> Term:
        key = key if key is not None else (kind, args)
        term = self._intern.get(key)
        if term is None:
            term = Term(kind, args, nullable, len(self._intern), boolean, bigcount)
            self._intern[key] = term
        return term

    @property
    def num_terms(self) -> int:
        """Terms interned so far (a proxy for memory use)."""
        return len(self._intern)

    def byte_set(self, mask: int) -> Term:
        """One byte out of the set ``mask`` (bit b = byte b)."""
        if not mask:
            return self.empty
        return self._make(BYTES_K, mask, False, False)

    def cat(self, a: Term, b: Term) -> Term:
        """Concatenation ``a b``."""
        if a is self.empty or b is self.empty:
            return self.empty
        if a is self.eps:
            return b
        if b is self.eps:
            return a
        return self._make(CAT_K, (a, b), a.nullable and b.nullable, a.boolean or b.boolean,
                          (CAT_K, a.uid, b.uid), max(a.bigcount, b.bigcount))

    def cat_all(self, parts: Sequence[Term]) -> Term:
        """Concatenation of many terms (right-nested)."""
        out = self.eps
        for part in reversed(parts):
            out = self.cat(part, out)
        return out

    def alt(self, items: Iterable[Term]) -> Term:
        """Alternation in canonical form (flattened, byte sets merged, sorted, unique)."""
        flat: dict[int, Term] = {}
        mask = 0
        for item in items:
            if item.kind == ALT_K:
                for sub in item.args:
                    if sub.kind == BYTES_K:
                        mask |= sub.args
                    else:
                        flat[sub.uid] = sub
            elif item.kind == BYTES_K:
                mask |= item.args
            elif item is not self.empty:
                flat[item.uid] = item
        if mask:
            b = self.byte_set(mask)
            flat[b.uid] = b
        if not flat:
            return self.empty
        if len(flat) == 1:
            return next(iter(flat.values()))
        uids = tuple(sorted(flat))
        members = tuple(flat[u] for u in uids)
        return self._make(ALT_K, members, any(m.nullable for m in members),
                          any(m.boolean for m in members), (ALT_K, uids),
                          max(m.bigcount for m in members))

    def rep(self, a: Term, lo: int, hi: int) -> Term:
        """``a{lo,hi}``; ``hi == -1`` is unbounded."""
        if hi == 0 or a is self.eps:
            return self.eps
        if a is self.empty:
            return self.eps if lo == 0 else self.empty
        if a.nullable:
            lo = 0  # a nullable item can always pad the count with empty matches
        if lo == 1 and hi == 1:
            return a
        if a.kind == REP_K and lo == 0 and hi == -1 and a.args[1] == 0 and a.args[2] == -1:
            return a
        return self._make(REP_K, (a, lo, hi), lo == 0 or a.nullable, a.boolean,
                          (REP_K, a.uid, lo, hi), max(lo, hi, a.bigcount))

    def and_(self, items: Iterable[Term]) -> Term:
        """Intersection."""
        flat: dict[int, Term] = {}
        for item in items:
            if item is self.empty:
                return self.empty
            for sub in (item.args if item.kind == AND_K else (item,)):
                flat[sub.uid] = sub
        if len(flat) == 1:
            return next(iter(flat.values()))
        uids = tuple(sorted(flat))
        members = tuple(flat[u] for u in uids)
        return self._make(AND_K, members, all(m.nullable for m in members), True, (AND_K, uids))

    def not_(self, a: Term) -> Term:
        """Complement (all byte strings not in ``a``)."""
        if a.kind == NOT_K:
            return a.args[0]
        return self._make(NOT_K, (a,), not a.nullable, True, (NOT_K, a.uid))

    # -- lowering -------------------------------------------------------------------------

    def lower(self, node: ra.Node) -> Term:
        """Byte term for a character-level regex tree.

        Lowering is lazy: a composite node becomes a ``LAZY`` term, expanded one level the
        first time a derivative reaches it, so parts of a big grammar that decoding never
        visits (deep free-form values, unused branches) cost nothing.
        """
        if node is ra.EMPTY:
            return self.empty
        if node is ra.EPSILON:
            return self.eps
        if isinstance(node, ra.Chars):
            return self.code_points(node.ranges)
        if isinstance(node, ra.Automaton):
            return self._automaton(node.machine, node.state)
        key = (LAZY_K, id(node))
        term = self._intern.get(key)
        if term is None:
            term = self._make(LAZY_K, node, node.nullable, node.constrained, key)
            self._lowered_keep.append(node)  # keep ids stable while interned
        return term

    def force(self, t: Term) -> Term:
        """The one-level expansion of a LAZY term (children stay lazy)."""
        if t.forced is not None:
            return t.forced
        node = t.args
        if isinstance(node, ra.Seq):
            out = self.cat_all([self.lower(item) for item in node.items])
        elif isinstance(node, ra.Alt):
            out = self.alt(self.lower(o) for o in node.options)
        elif isinstance(node, ra.Repeat):
            out = self.rep(self.lower(node.item), node.lo, -1 if node.hi is None else node.hi)
        elif isinstance(node, ra.Constrained):
            parts = [self.lower(node.base), *(self.lower(r) for r in node.require)]
            parts += [self.not_(self.lower(f)) for f in node.forbid]
            out = self.and_(parts)
        else:
            raise TypeError(f"not a regex node: {node!r}")
        t.forced = out
        return out

    def _automaton(self, machine: ra.AsciiMachine, state: object) -> Term:
        """The term of one machine state (interned by the machine's identity and the state)."""
        key = (AUTO_K, id(machine), state)
        term = self._intern.get(key)
        if term is None:
            term = self._make(AUTO_K, (machine, state), machine.accepting(state), False, key)
            self._lowered_keep.append(machine)  # keep ids stable while interned
        return term

    def code_points(self, ranges: tuple[tuple[int, int], ...]) -> Term:
        """One character (as UTF-8 bytes) out of the code-point ranges."""
        hit = self._class_cache.get(ranges)
        if hit is not None:
            return hit
        seqs: list[Term] = []
        for lo, hi in ranges:
            for byte_ranges in utf8_sequences(lo, hi):
                seqs.append(self.cat_all([self.byte_set(_range_mask(b0, b1))
                                          for b0, b1 in byte_ranges]))
        term = self.alt(seqs)
        self._class_cache[ranges] = term
        return term

    # -- derivatives ----------------------------------------------------------------------

    def derivative(self, t: Term, byte: int) -> Term:
        """The term matching ``{s : byte + s in t}``."""
        hit = t.deriv.get(byte)
        if hit is not None:
            return hit
        kind = t.kind
        if kind == BYTES_K:
            out = self.eps if (t.args >> byte) & 1 else self.empty
        elif kind == CAT_K:
            out = self._cat_derivative(t, byte)
        elif kind == ALT_K:
            out = self.alt([self.derivative(m, byte) for m in t.args])
        elif kind == REP_K:
            a, lo, hi = t.args
            rest = self.rep(a, max(lo - 1, 0), hi - 1 if hi > 0 else -1)
            out = self.cat(self.derivative(a, byte), rest)
        elif kind == AND_K:
            out = self.and_([self.derivative(m, byte) for m in t.args])
        elif kind == NOT_K:
            out = self.not_(self.derivative(t.args[0], byte))
        elif kind == LAZY_K:
            out = self.derivative(self.force(t), byte)
        elif kind == AUTO_K:
            machine, state = t.args
            nxt = machine.step(state, byte)
            out = self.empty if nxt is None else self._automaton(machine, nxt)
        else:  # EMPTY, EPS
            out = self.empty
        t.deriv[byte] = out
        return out

    def _cat_derivative(self, t: Term, byte: int) -> Term:
        """d(a1 (a2 (a3 ...))) walked iteratively along the right spine while heads are
        nullable (long chains of optional parts would otherwise recurse deeply)."""
        parts = []
        node = t
        while True:
            a, b = node.args
            parts.append(self.cat(self.derivative(a, byte), b))
            if not a.nullable:
                break
            hit = b.deriv.get(byte)
            if hit is not None:
                parts.append(hit)
                break
            if b.kind != CAT_K:
                parts.append(self.derivative(b, byte))
                break
            node = b
        return parts[0] if len(parts) == 1 else self.alt(parts)

    def classes(self, t: Term) -> tuple[int, ...]:
        """A partition of the 256 bytes (bit masks) on whose parts the derivative is constant."""
        if t.classes is not None:
            return t.classes
        kind = t.kind
        if kind == BYTES_K:
            out = tuple(m for m in (t.args, FULL_MASK ^ t.args) if m)
        elif kind == CAT_K:
            out = self._cat_classes(t)
        elif kind in (ALT_K, AND_K):
            out = (FULL_MASK,)
            for m in t.args:
                out = _refine(out, self.classes(m))
        elif kind in (REP_K, NOT_K):
            out = self.classes(t.args[0])
        elif kind == LAZY_K:
            out = self.classes(self.force(t))
        elif kind == AUTO_K:
            out = t.args[0].classes(t.args[1])
        else:
            out = (FULL_MASK,)
        t.classes = out
        return out

    def _cat_classes(self, t: Term) -> tuple[int, ...]:
        """classes() of a concatenation, iterating along its right spine."""
        a, b = t.args
        out = self.classes(a)
        while a.nullable:
            if b.kind != CAT_K or b.classes is not None:
                return _refine(out, self.classes(b))
            a, b = b.args
            out = _refine(out, self.classes(a))
        return out

    # -- canonical form for token masks -------------------------------------------------------

    def clamp(self, t: Term, reach: int) -> Term:
        """``t`` with repetition counters beyond ``reach`` bytes clamped.

        Within ``reach`` bytes (the longest token) a counter larger than ``reach`` behaves
        like ``reach + 1`` (a lower bound) or like no bound at all (an upper bound), and
        clamping keeps every term live that was live, so a state's allowed tokens equal those
        of its clamped term: states that differ only in far-away counters share one mask.
        Intersections and complements are left alone (their liveness is global); around
        them concatenation and alternation combine liveness part by part, so clamping there
        is safe.
        """
        if t.bigcount <= reach:
            return t  # no counter past the reach: nothing to clamp
        if t.clamped is not None and t.clamped[0] == reach:
            return t.clamped[1]
        if t.kind in (EMPTY_K, EPS_K, BYTES_K, AND_K, NOT_K, LAZY_K, AUTO_K) or \
                (t.boolean and t.kind == REP_K):
            # inside AND/NOT (and repeats of them) liveness is global: keep exact; a LAZY
            # part is not entered yet, so it is the same object in every state anyway
            out = t
        elif t.kind == CAT_K:
            spine = []
            node = t
            while node.kind == CAT_K:
                spine.append(node.args[0])
                node = node.args[1]
            out = self.clamp(node, reach)
            for part in reversed(spine):
                out = self.cat(self.clamp(part, reach), out)
        elif t.kind == ALT_K:
            out = self.alt(self.clamp(m, reach) for m in t.args)
        else:  # REP
            a, lo, hi = t.args
            lo = min(lo, reach + 1)
            hi = -1 if hi == -1 or hi > reach else hi
            out = self.rep(self.clamp(a, reach), lo, hi)
        t.clamped = (reach, out)
        return out

    # -- liveness -------------------------------------------------------------------------

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
                found = self._search_live(m, min(budget, left))
                left -= self._visited - before
                if found:
                    return True
                if found is None:
                    undecided.append(m)
            pending, budget = undecided, budget * 8
        return False

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
            out = self.search_estimate(self.force(t))
        else:  # NOT of a nullable operand, AUTO (not nullable: one byte at least), EMPTY
            out = 1
        t.estimate = out
        return out

    def _ordered_reps(self, t: Term) -> list[int]:
        """One byte per derivative class, the smallest class last (popped first)."""
        classes = sorted(self.classes(t), key=lambda m: -m.bit_count())
        return [(m & -m).bit_length() - 1 for m in classes]

    def matches(self, t: Term, data: bytes) -> bool:
        """Whether ``t`` matches the whole of ``data`` (for tests and checks)."""
        for byte in data:
            t = self.derivative(t, byte)
            if t is self.empty:
                return False
        return t.nullable


_FIRST_ROUND_STATES = 256  # an alternation's members are first searched this far each
_DEADLINE_EVERY = 32  # search states expanded between two deadline checks


def _range_mask(lo: int, hi: int) -> int:
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
