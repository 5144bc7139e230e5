"""Byte-level regular terms with Brzozowski derivatives: the automaton behind every grammar.

A :class:`TermBuilder` lowers a character-level :mod:`..regex.tree` tree to byte terms (character
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

from collections.abc import Callable, Iterable, Sequence

from ..regex import tree as ra
from ..regex.utf8 import utf8_sequences
from .intersection_clamp import IntersectionClamp
from .liveness import LivenessSearch
from .term import (
    ALT_K,
    AND_K,
    AUTO_K,
    BYTES_K,
    CAT_K,
    EMPTY_K,
    EPS_K,
    FULL_MASK,
    LAZY_K,
    NOT_K,
    REP_K,
    Term,
    part_index,
    refine,
    refine_indexed,
)

# Work steps charged per term created (see TermBuilder.work_steps): a least-squares fit over
# Handwritten's slowest compiles (a calls at ~0.5 us, a term at ~4.5 us on a Zen 4 core).
TERM_STEPS = 8


class TermBuilder(LivenessSearch, IntersectionClamp):
    """Interns terms, lowers regex trees and computes derivatives; one per grammar (liveness
    of intersections and complements: :class:`liveness.LivenessSearch`; length counters
    clamped inside them: :class:`intersection_clamp.IntersectionClamp`)."""

    def __init__(self, liveness_budget: int = 50_000, clamp_budget: int = 4096) -> None:
        self._intern: dict[tuple | int, Term] = {}
        self._lowered_keep: list[ra.Node] = []
        self._class_cache: dict[tuple[tuple[int, int], ...], Term] = {}
        # classes of alternations and intersections by their members' (_common_refinement)
        self._refinements: dict[tuple[int, ...], tuple[tuple[int, ...], list]] = {}
        # a partition's byte -> part index by its id (the partition kept alive beside it)
        self._part_indexes: dict[int, tuple[list[int], tuple[int, ...]]] = {}
        self.liveness_budget = liveness_budget
        # pairs one intersection-clamp check may walk (about a row each; past it: exact)
        self.clamp_budget = clamp_budget
        self._radii: dict[tuple[int, int], int | None] = {}
        self._visited = 0  # states the liveness searches have visited, in all
        self._reps: dict[int, tuple[list[int], tuple[int, ...]]] = {}  # _ordered_reps memo
        # called every _DEADLINE_EVERY search states: raises (GrammarBudgetError) once the
        # work this search is part of (a compile, one mask) is out of time; None: no limit
        self.deadline: Callable[[], None] | None = None
        self._expanded = 0  # terms the liveness searches have expanded, in all
        self._derivative_calls = 0  # derivative() calls, in all (see work_steps)
        self._charged = 0  # other work charged by its owner (charge_steps), in all
        self.empty = self._make(EMPTY_K, None, False, False)
        self.eps = self._make(EPS_K, None, True, False)
        self.empty.live, self.eps.live = False, True

    # -- construction ---------------------------------------------------------------------

    def _make(self, kind: int, args: object, nullable: bool, boolean: bool,
              key: tuple | int | None = None, bigcount: int = 0) -> Term:
        key = key if key is not None else (kind, args)
        term = self._intern.get(key)
        if term is None:
            term = Term(kind, args, nullable, len(self._intern), boolean, bigcount)
            self._intern[key] = term
            self._charged += TERM_STEPS
        return term

    @property
    def num_terms(self) -> int:
        """Terms interned so far (a proxy for memory use)."""
        return len(self._intern)

    @property
    def work_steps(self) -> int:
        """Steps of work so far: :meth:`derivative` calls (memo hits included), terms the
        liveness searches expanded, :data:`TERM_STEPS` per term created, and what owners
        charged (:meth:`charge_steps`).

        What the step budgets read (``CompileBudget.max_mask_steps``): a count, so the same
        grammar stops at the same point on any machine and under any load, unlike seconds.
        Calls, not terms created: a derivative of a wide alternation or intersection calls
        itself once per member, hits or not, and that loop is where the time goes (about
        1-3 us a call on the corpus; counting new terms only misjudged costs by 20 times).
        A new term costs about as much as :data:`TERM_STEPS` calls besides (interning, its
        byte classes and estimate when first read): uncharged, a step took 0.5 us where
        terms were few (Handwritten allany15, 8 k terms in 1.76 M calls) and 1.4 us where
        they were many (allOfPProp5, 203 k in 1.04 M), so a budget in steps could not bound
        the time of a refusal."""
        return self._derivative_calls + self._expanded + self._charged

    def release(self) -> None:
        """Forget every term (an automaton no longer wanted: a refused compile's). Terms form
        cycles (a derivative leading back, a recursive rule's expansion, a clamped form), so
        a dropped automaton waited for the cyclic collector, which scanned its 100-150 k
        terms while the next compile ran; with those caches emptied, reference counting
        frees them at once. The builder is unusable afterwards."""
        for t in self._intern.values():
            t.deriv.clear()
            t.forced = None
            t.clamped = None
        for cache in (self._intern, self._refinements, self._part_indexes, self._reps,
                      self._class_cache, self._radii):
            cache.clear()
        self._lowered_keep.clear()
        self.deadline = None

    def charge_steps(self, steps: int) -> None:
        """Count ``steps`` more of :attr:`work_steps`: work outside the derivatives and the
        liveness searches that a step budget must see (a search over terms of its own)."""
        self._charged += steps

    def byte_set(self, mask: int) -> Term:
        """One byte out of the set ``mask`` (bit b = byte b)."""
        if not mask:
            return self.empty
        return self._make(BYTES_K, mask, False, False)

    def cat(self, a: Term, b: Term) -> Term:
        """Concatenation ``a b``."""
        empty, eps = self.empty, self.eps
        if a is empty or b is empty:
            return empty
        if a is eps:
            return b
        if b is eps:
            return a
        # an int, not a tuple (the one int key of _intern): cat runs for every derivative
        # of a concatenation, and a tuple key cost its allocation and hash each time
        key = a.uid << 32 | b.uid
        hit = self._intern.get(key)
        if hit is not None:  # most are (a derivative's tail is shared): no flags read
            return hit
        return self._make(CAT_K, (a, b), a.nullable and b.nullable, a.boolean or b.boolean,
                          key, max(a.bigcount, b.bigcount))

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
        hit = self._intern.get((ALT_K, uids))
        if hit is not None:  # most are: the members' flags are then not read again
            return hit
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
        empty = self.empty
        for item in items:
            if item is empty:
                return empty
            if item.kind == AND_K:
                for sub in item.args:
                    flat[sub.uid] = sub
            else:
                flat[item.uid] = item
        if len(flat) == 1:
            return next(iter(flat.values()))
        uids = tuple(sorted(flat))
        hit = self._intern.get((AND_K, uids))
        if hit is not None:  # most are (allany23: 2 in 3), as in alt
            return hit
        members = tuple(flat[u] for u in uids)
        return self._make(AND_K, members, all(m.nullable for m in members), True, (AND_K, uids),
                          max(m.bigcount for m in members))

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
        self._derivative_calls += 1
        return self._derive(t, byte)

    def _members(self, members: tuple[Term, ...], byte: int) -> list[Term]:
        """The derivatives of an alternation's or intersection's members, each counted as a
        :meth:`derivative` call, their memo read inline: on the corpus most are hits, and a
        call per hit cost as much as the rest of the work (allany15: 270 k of 290 k calls)."""
        self._derivative_calls += len(members)
        derive = self._derive
        return [m.deriv.get(byte) or derive(m, byte) for m in members]

    def _derive(self, t: Term, byte: int) -> Term:
        """:meth:`derivative` without counting the call (the caller has)."""
        hit = t.deriv.get(byte)
        if hit is not None:
            return hit
        kind = t.kind
        if kind == CAT_K:  # the most frequent, first
            a, b = t.args
            if a.nullable:
                out = self._cat_derivative(t, byte)
            else:  # d(a b) = d(a) b, inlined: the bulk of every derivative of a deep term
                self._derivative_calls += 1
                da = a.deriv.get(byte) or self._derive(a, byte)
                if da is self.empty:
                    out = da
                elif da is self.eps:
                    out = b  # (never EPS or EMPTY: cat() leaves neither in a concatenation)
                else:
                    out = self._intern.get(da.uid << 32 | b.uid) or self.cat(da, b)
        elif kind == BYTES_K:
            out = self.eps if (t.args >> byte) & 1 else self.empty
        elif kind == ALT_K:
            out = self.alt(self._members(t.args, byte))
        elif kind == REP_K:
            a, lo, hi = t.args
            rest = self.rep(a, max(lo - 1, 0), hi - 1 if hi > 0 else -1)
            out = self.cat(self.derivative(a, byte), rest)
        elif kind == AND_K:
            out = self.and_(self._members(t.args, byte))
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
        a, b = t.args
        cat, derive = self.cat, self._derive
        self._derivative_calls += 1  # a derivative() call, its memo read inline
        head = cat(a.deriv.get(byte) or derive(a, byte), b)
        if not a.nullable:  # most heads: d(a b) = d(a) b
            return head
        parts = [head]
        while True:
            hit = b.deriv.get(byte)
            if hit is not None:
                parts.append(hit)
                break
            if b.kind != CAT_K:
                self._derivative_calls += 1
                parts.append(b.deriv.get(byte) or derive(b, byte))
                break
            a, b = b.args
            self._derivative_calls += 1
            parts.append(cat(a.deriv.get(byte) or derive(a, byte), b))
            if not a.nullable:
                break
        return self.alt(parts)

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
            out = self._common_refinement([self.classes(m) for m in t.args])
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

    def _common_refinement(self, parts: list[tuple[int, ...]]) -> tuple[int, ...]:
        """``refine`` folded over ``parts`` from the full set, memoised by the parts' identity:
        the derivatives of an intersection or alternation mostly repeat the partitions of
        their members (Handwritten allany15/allany23: 2.8 k distinct of 18.9 k), and the fold
        of a dozen partitions of 15-20 parts each was a third of a compile's time. A
        partition met before in the fold changes nothing (the result refines it already,
        and refining by it keeps the result and its order): skipped."""
        key = tuple([id(p) for p in parts if len(p) > 1])
        hit = self._refinements.get(key)
        if hit is not None:
            return hit[0]
        out: tuple[int, ...] = (FULL_MASK,)
        seen: set[tuple[int, ...]] = set()
        indexes = self._part_indexes
        for part in parts:
            if len(part) > 1 and part not in seen:
                seen.add(part)
                index = indexes.get(id(part))
                if index is None:  # a member's partition, met again in many folds
                    index = indexes[id(part)] = (part_index(part), part)
                out = refine_indexed(out, part, index[0])
        self._refinements[key] = (out, parts)  # the parts kept alive: their ids stay theirs
        return out

    def _cat_classes(self, t: Term) -> tuple[int, ...]:
        """classes() of a concatenation, iterating along its right spine."""
        a, b = t.args
        out = self.classes(a)
        while a.nullable:
            if b.kind != CAT_K or b.classes is not None:
                return refine(out, self.classes(b))
            a, b = b.args
            out = refine(out, self.classes(a))
        return out

    # -- canonical form for token masks -------------------------------------------------------

    def clamp(self, t: Term, reach: int) -> Term:
        """``t`` with repetition counters beyond ``reach`` bytes clamped.

        Within ``reach`` bytes (the longest token) a counter larger than ``reach`` behaves
        like ``reach + 1`` (a lower bound) or like no bound at all (an upper bound), and
        clamping keeps every term live that was live, so a state's allowed tokens equal those
        of its clamped term: states that differ only in far-away counters share one mask.
        Complements are left alone (their liveness is global), and intersections too unless
        the counter provably cannot matter (:meth:`clamp_intersection`); around them
        concatenation and alternation combine liveness part by part, so clamping there is
        safe.
        """
        if t.bigcount <= reach:
            return t  # no counter past the reach: nothing to clamp
        if t.clamped is not None and t.clamped[0] == reach:
            return t.clamped[1]
        if t.kind in (EMPTY_K, EPS_K, BYTES_K, NOT_K, LAZY_K, AUTO_K) or \
                (t.boolean and t.kind == REP_K):
            # inside NOT (and repeats of booleans) liveness is global: keep exact; a LAZY
            # part is not entered yet, so it is the same object in every state anyway
            out = t
        elif t.kind == AND_K:
            out = self.clamp_intersection(t, reach)
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

    def matches(self, t: Term, data: bytes) -> bool:
        """Whether ``t`` matches the whole of ``data`` (for tests and checks)."""
        for byte in data:
            t = self.derivative(t, byte)
            if t is self.empty:
                return False
        return t.nullable


def _range_mask(lo: int, hi: int) -> int:
    return ((1 << (hi + 1)) - 1) ^ ((1 << lo) - 1)
