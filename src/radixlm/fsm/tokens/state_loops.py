"""Per DFA state, what leads straight back to it, and where every character leads: the other
half of the subtree skips (:mod:`subtree_summary`).

The compiled walk fills, the first time it needs a state's, the ASCII bytes that map the state
to itself (two 64-bit words, from its built row). Whether every well-formed multi-byte UTF-8
character leads back to the state is answered here, in Python, when the walk asks (it stops
and resumes as for a missing row): it walks the state through each lead-byte range and its
continuation ranges (:data:`subtree_summary.UTF8_SEQUENCES`), building the few rows on the way
(inside a free JSON string: the states waiting for 1-3 continuation bytes). The same walk says
which one state every multi-byte character leads to, if one (:attr:`StateLoops.utf8_to`):
for the counting skip, where each character moves state k to one same state k + 1 (a bounded
string). The walk fills that skip's ASCII half itself (:meth:`StateLoops.steps_at_least`):
the live successor most ASCII bytes lead to, those bytes, and the ASCII bytes that lead to
the dead state. Rows never change once built, so the answers are kept for the DFA's life, one
:class:`StateLoops` per DFA.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..automaton.lazy_dfa import DEAD, grown_rows
from .subtree_summary import UTF8_SEQUENCES

UNKNOWN, YES, NO = 0, 1, 2  # StateLoops.utf8 values
# StateLoops.utf8_to values besides a state (DEAD: every multi-byte character dies there)
UTF8_UNKNOWN, UTF8_MIXED = -1, -2


class StateLoops:
    """Per state (grown with the DFA's table): ``known`` (uint8: 1 once ``ascii`` is filled),
    ``ascii`` (uint64 [states, 2]: the ASCII bytes looping there, filled by the walk) and
    ``utf8`` (uint8: :data:`UNKNOWN`, :data:`YES` every well-formed multi-byte character
    leads back, :data:`NO`); for the counting skip, ``utf8_to`` (int32: the state every
    well-formed multi-byte character leads to, :data:`UTF8_UNKNOWN` or :data:`UTF8_MIXED`
    where they lead to different states), ``step_known`` (uint8: 1 once the next three are
    filled by the walk), ``step_to`` (int32: the live successor the most ASCII bytes lead to,
    DEAD if none), ``step_ascii`` and ``dead_ascii`` (uint64 [states, 2]: the ASCII bytes
    leading to ``step_to``, and to the dead state)."""

    def __init__(self) -> None:
        self.known = np.zeros(64, dtype=np.uint8)
        self.ascii = np.zeros((64, 2), dtype=np.uint64)
        self.utf8 = np.zeros(64, dtype=np.uint8)
        self.utf8_to = np.full(64, UTF8_UNKNOWN, dtype=np.int32)
        self.step_known = np.zeros(64, dtype=np.uint8)
        self.step_to = np.zeros(64, dtype=np.int32)
        self.step_ascii = np.zeros((64, 2), dtype=np.uint64)
        self.dead_ascii = np.zeros((64, 2), dtype=np.uint64)

    def at_least(self, capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(known, ascii, utf8), grown to at least ``capacity`` states, answers kept."""
        if self.known.size < capacity:
            size = max(capacity, 2 * self.known.size)
            self.known = grown_rows(self.known, size)
            self.ascii = grown_rows(self.ascii, size)
            self.utf8 = grown_rows(self.utf8, size)
            old = self.utf8_to.size
            self.utf8_to = grown_rows(self.utf8_to, size)
            self.utf8_to[old:] = UTF8_UNKNOWN
            self.step_known = grown_rows(self.step_known, size)
            self.step_to = grown_rows(self.step_to, size)
            self.step_ascii = grown_rows(self.step_ascii, size)
            self.dead_ascii = grown_rows(self.dead_ascii, size)
        return self.known, self.ascii, self.utf8

    def steps_at_least(self, capacity: int) -> tuple[np.ndarray, ...]:
        """(utf8_to, step_known, step_to, step_ascii, dead_ascii), grown to at least
        ``capacity`` states, answers kept."""
        self.at_least(capacity)
        return self.utf8_to, self.step_known, self.step_to, self.step_ascii, self.dead_ascii

    def answer_utf8(self, state: int, trans: Callable[[], np.ndarray],
                    ensure_rows: Callable[[np.ndarray], None]) -> None:
        """Fill ``utf8[state]`` and ``utf8_to[state]`` (its row built), building the rows the
        check steps through."""
        target = utf8_target(state, trans, ensure_rows)
        self.at_least(state + 1)
        self.utf8[state] = YES if target == state else NO
        self.utf8_to[state] = target


def utf8_loops(state: int, trans: Callable[[], np.ndarray],
               ensure_rows: Callable[[np.ndarray], None]) -> bool:
    """Whether every well-formed multi-byte UTF-8 character leads from ``state`` back to it
    (``trans()`` the current table; ``ensure_rows`` builds missing rows)."""
    return utf8_target(state, trans, ensure_rows) == state


def utf8_target(state: int, trans: Callable[[], np.ndarray],
                ensure_rows: Callable[[np.ndarray], None]) -> int:
    """The one state every well-formed multi-byte UTF-8 character leads to from ``state``
    (DEAD where every one dies), or :data:`UTF8_MIXED` (``trans()`` the current table;
    ``ensure_rows`` builds missing rows)."""
    target = None
    for seq in UTF8_SEQUENCES:
        frontier = np.array([state], dtype=np.int32)
        for lo, hi in seq:
            ensure_rows(frontier)
            frontier = np.unique(trans()[frontier, lo:hi + 1])
            if frontier[0] == DEAD:
                if frontier.size > 1:  # some of these characters die, some do not
                    return UTF8_MIXED
                break  # all of them die
        if frontier.size != 1 or target not in (None, int(frontier[0])):
            return UTF8_MIXED
        target = int(frontier[0])
    return target if target is not None else UTF8_MIXED
