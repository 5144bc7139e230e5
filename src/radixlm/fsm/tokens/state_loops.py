"""Per DFA state, what leads straight back to it: the other half of the subtree skip
(:mod:`subtree_summary`).

The compiled walk fills, the first time it needs a state's, the ASCII bytes that map the state
to itself (two 64-bit words, from its built row). Whether every well-formed multi-byte UTF-8
character leads back to the state is answered here, in Python, when the walk asks (it stops
and resumes as for a missing row): it walks the state through each lead-byte range and its
continuation ranges (:data:`subtree_summary.UTF8_SEQUENCES`), building the few rows on the way
(inside a free JSON string: the states waiting for 1-3 continuation bytes). Rows never change
once built, so the answers are kept for the DFA's life, one :class:`StateLoops` per DFA.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..automaton.lazy_dfa import DEAD, grown_rows
from .subtree_summary import UTF8_SEQUENCES

UNKNOWN, YES, NO = 0, 1, 2  # StateLoops.utf8 values


class StateLoops:
    """Per state (grown with the DFA's table): ``known`` (uint8: 1 once ``ascii`` is filled),
    ``ascii`` (uint64 [states, 2]: the ASCII bytes looping there, filled by the walk) and
    ``utf8`` (uint8: :data:`UNKNOWN`, :data:`YES` every well-formed multi-byte character
    leads back, :data:`NO`)."""

    def __init__(self) -> None:
        self.known = np.zeros(64, dtype=np.uint8)
        self.ascii = np.zeros((64, 2), dtype=np.uint64)
        self.utf8 = np.zeros(64, dtype=np.uint8)

    def at_least(self, capacity: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(known, ascii, utf8), grown to at least ``capacity`` states, answers kept."""
        if self.known.size < capacity:
            size = max(capacity, 2 * self.known.size)
            self.known = grown_rows(self.known, size)
            self.ascii = grown_rows(self.ascii, size)
            self.utf8 = grown_rows(self.utf8, size)
        return self.known, self.ascii, self.utf8

    def answer_utf8(self, state: int, trans: Callable[[], np.ndarray],
                    ensure_rows: Callable[[np.ndarray], None]) -> None:
        """Fill ``utf8[state]`` (its row built), building the rows the check steps through."""
        ok = utf8_loops(state, trans, ensure_rows)
        self.at_least(state + 1)
        self.utf8[state] = YES if ok else NO


def utf8_loops(state: int, trans: Callable[[], np.ndarray],
               ensure_rows: Callable[[np.ndarray], None]) -> bool:
    """Whether every well-formed multi-byte UTF-8 character leads from ``state`` back to it
    (``trans()`` the current table; ``ensure_rows`` builds missing rows)."""
    for seq in UTF8_SEQUENCES:
        frontier = np.array([state], dtype=np.int32)
        for lo, hi in seq:
            ensure_rows(frontier)
            reached = np.unique(trans()[frontier, lo:hi + 1])
            if reached[0] == DEAD:
                return False
            frontier = reached
        if frontier.size != 1 or frontier[0] != state:
            return False
    return True


