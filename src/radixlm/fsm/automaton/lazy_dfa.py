"""A byte-level DFA whose states are derivative terms, built one state at a time on demand.

State 0 is the dead state (every row entry 0 leads there). A state's row of 256 successors is
computed the first time anything steps out of it; the table grows by doubling. The state
budget is enforced here, so a grammar that explodes while decoding fails with a clear
:class:`GrammarBudgetError` instead of eating the host's memory.
"""

from __future__ import annotations

import threading

import numpy as np

from ..errors import GrammarBudgetError, GrammarError
from .derivatives import TermBuilder
from .liveness import LivenessBudgetError
from .term import Term

DEAD = 0
_ROW_BYTES = 256 * 4


class LazyDFA:
    """States, transitions and acceptance of the automaton of ``root`` (explored lazily)."""

    def __init__(self, builder: TermBuilder, root: Term, max_states: int = 1_000_000) -> None:
        self.builder = builder
        self.max_states = max_states
        # Growing the automaton (and the term builder behind it) is serialised; reading
        # built rows needs no lock (rows are written before their "built" flag).
        self.lock = threading.RLock()
        cap = 64
        self.trans = np.zeros((cap, 256), dtype=np.int32)
        self.built = np.zeros(cap, dtype=bool)
        self.accepting = np.zeros(cap, dtype=bool)
        self.built[DEAD] = True
        self._terms: list[Term] = [builder.empty]
        self._state_ids: dict[int, int] = {}
        self._index_cache: dict[int, np.ndarray] = {}
        self.initial = self.state_of(root)

    @property
    def num_states(self) -> int:
        """States discovered so far, the dead state included."""
        return len(self._terms)

    @property
    def memory_bytes(self) -> int:
        """Approximate memory held by the table (and the terms behind it)."""
        return self.trans.nbytes + 160 * self.builder.num_terms

    @property
    def state_ids(self) -> dict[int, int]:
        """The state of every registered term, by the term's uid (:data:`DEAD` for terms
        found dead); read it only (register through :meth:`state_of`)."""
        return self._state_ids

    def term(self, state: int) -> Term:
        """The derivative term a state stands for."""
        return self._terms[state]

    def state_of(self, term: Term) -> int:
        """The state of ``term`` (registering it); dead terms map to :data:`DEAD`."""
        sid = self._state_ids.get(term.uid)
        if sid is not None:
            return sid
        with self.lock:
            return self._register(term)

    def _register(self, term: Term) -> int:
        sid = self._state_ids.get(term.uid)
        if sid is not None:
            return sid
        try:
            live = self.builder.is_live(term)
        except LivenessBudgetError as exc:
            raise GrammarBudgetError("liveness", self.builder.liveness_budget, str(exc)) from exc
        if not live:
            self._state_ids[term.uid] = DEAD
            return DEAD
        sid = len(self._terms)
        if sid >= self.max_states:
            raise GrammarBudgetError("states", self.max_states,
                                     "the automaton needs more states than allowed")
        if sid >= self.trans.shape[0]:
            self._grow()
        self._terms.append(term)
        self._state_ids[term.uid] = sid
        self.accepting[sid] = term.nullable
        return sid

    def _grow(self) -> None:
        # np.zeros maps fresh zero pages lazily (calloc): only the used half is copied and
        # touched now, the rest faults in a page (4 rows) at a time as rows are written.
        # (concatenate with zeros_like wrote both halves: ~130 ms at 32k -> 64k states.)
        old = self.trans.shape[0]
        self.trans = grown_rows(self.trans, 2 * old)
        self.built = grown_rows(self.built, 2 * old)
        self.accepting = grown_rows(self.accepting, 2 * old)

    def _byte_indices(self, mask: int) -> np.ndarray:
        idx = self._index_cache.get(mask)
        if idx is None:
            bits = np.unpackbits(np.frombuffer(mask.to_bytes(32, "little"), dtype=np.uint8),
                                 bitorder="little")
            idx = np.flatnonzero(bits)
            self._index_cache[mask] = idx
        return idx

    def build_row(self, state: int) -> None:
        """Compute the successors of ``state`` (no-op when already built)."""
        if self.built[state]:
            return
        with self.lock:
            if not self.built[state]:
                self._build_row(state)

    def _build_row(self, state: int) -> None:
        term = self._terms[state]
        builder = self.builder
        targets = []
        for mask in builder.classes(term):
            nxt = builder.derivative(term, (mask & -mask).bit_length() - 1)
            targets.append((mask, self.state_of(nxt)))
        row = self.trans[state]  # after state_of: the table may have grown
        for mask, target in targets:
            if target != DEAD:
                row[self._byte_indices(mask)] = target
        self.built[state] = True

    def ensure_rows(self, states: np.ndarray) -> None:
        """Build the rows of every state in ``states`` that has none yet."""
        missing = states[~self.built[states]]
        if missing.size:
            for s in np.unique(missing).tolist():
                self.build_row(s)

    def row(self, state: int) -> np.ndarray:
        """The 256 successors of ``state`` (0 = dead)."""
        self.build_row(state)
        return self.trans[state]

    def step(self, state: int, byte: int) -> int:
        """Successor of ``state`` on one byte."""
        self.build_row(state)
        return int(self.trans[state, byte])

    def walk(self, state: int, data: bytes) -> int:
        """State after ``data`` from ``state`` (:data:`DEAD` when rejected)."""
        for byte in data:
            if not self.built[state]:
                self.build_row(state)
            state = self.trans[state, byte]
            if state == DEAD:
                return DEAD
        return int(state)

    def walk_built(self, state: int, data: bytes) -> int | None:
        """State after ``data`` from ``state`` through rows already built, taking no lock and
        building nothing; None when a row on the way is missing (the walk would build it).

        Safe against a writer on another thread: ``built`` is read before ``trans``, and the
        table grows by assigning the new ``trans`` before the new ``built``, so a flag read
        here always has its row in the ``trans`` read after it (rows are written before
        their flag)."""
        built = self.built
        trans = self.trans
        for byte in data:
            if state >= built.shape[0] or not built[state]:
                return None
            state = trans[state, byte]
            if state == DEAD:
                return DEAD
        return int(state)

    def mask_key(self, state: int, reach: int) -> int:
        """The state of ``state``'s clamped term (see :meth:`TermBuilder.clamp`): states with
        the same key allow the same tokens of at most ``reach`` bytes."""
        if state == DEAD:
            return DEAD
        with self.lock:
            return self.state_of(self.builder.clamp(self._terms[state], reach))

    def matches(self, data: bytes) -> bool:
        """Whether the whole of ``data`` is in the language."""
        state = self.walk(self.initial, data)  # may grow the table: read it afterwards
        return bool(self.accepting[state])


def grown_rows(array: np.ndarray, rows: int) -> np.ndarray:
    """``array`` with zero rows appended up to ``rows`` (a new buffer; the old one stays valid
    for readers that still hold it)."""
    out = np.zeros((rows, *array.shape[1:]), dtype=array.dtype)
    out[: array.shape[0]] = array
    return out


def shortest_completion(dfa: LazyDFA, state: int, max_states: int = 100_000) -> bytes | None:
    """The shortest bytes leading from ``state`` to an accepting state (None if none within
    ``max_states``): how to close an output that must stop (e.g. at a token limit)."""
    parents: dict[int, tuple[int, int]] = {state: (-1, -1)}
    frontier = [state]
    while frontier and len(parents) <= max_states:
        nxt = []
        for s in frontier:
            if dfa.accepting[s]:
                out = bytearray()
                while parents[s][0] != -1:
                    s, byte = parents[s]
                    out.append(byte)
                return bytes(reversed(out))
            row = dfa.row(s)
            targets, firsts = np.unique(row, return_index=True)
            for t, b in zip(targets.tolist(), firsts.tolist(), strict=True):
                if t != DEAD and t not in parents:
                    parents[t] = (s, b)
                    nxt.append(t)
        frontier = nxt
    return None


def check_satisfiable(dfa: LazyDFA) -> None:
    """Raise :class:`GrammarError` when the grammar matches nothing at all."""
    if dfa.initial == DEAD:
        raise GrammarError("the grammar matches no string at all (unsatisfiable constraints)")
