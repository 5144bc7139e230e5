"""Compressed FSM: the deterministic byte run (singular path) from each automaton state.

A state is *singular* when it is not accepting (the model may stop there, so it is a branch
point) and exactly one byte leads to a live state. Following singular states gives the bytes
every valid continuation starts with; jump-forward appends them without running the model.
Runs are computed lazily per state and cached; a run that ends inside a multi-byte character
is cut back to the last character boundary, and a state in the middle of a character has no
run (its text so far does not end on a character boundary).
"""

from __future__ import annotations

import numpy as np

from .lazy_dfa import DEAD, LazyDFA

MAX_JUMP_BYTES = 4096


class CompressedFSM:
    """Singular-path runs of a :class:`LazyDFA` (lazily, cached per state)."""

    def __init__(self, dfa: LazyDFA, max_bytes: int = MAX_JUMP_BYTES) -> None:
        self.dfa = dfa
        self.max_bytes = max_bytes
        self._runs: dict[int, tuple[bytes, int]] = {}

    def singular_byte(self, state: int) -> int | None:
        """The only byte that continues ``state``, or None (branching, accepting or dead)."""
        if state == DEAD or self.dfa.accepting[state]:
            return None
        live = np.flatnonzero(self.dfa.row(state))
        return int(live[0]) if live.size == 1 else None

    def run_ready(self, state: int) -> bool:
        """Whether :meth:`run` of ``state`` builds no automaton row (and takes no lock): its
        run is cached, or it has none that its own built row does not already show (dead,
        accepting, or branching)."""
        dfa = self.dfa
        if state in self._runs or state == DEAD or dfa.accepting[state]:
            return True
        return bool(dfa.built[state]) and np.count_nonzero(dfa.trans[state]) != 1

    def run(self, state: int) -> tuple[bytes, int]:
        """(forced bytes from ``state``, state after them); cut to a character boundary."""
        hit = self._runs.get(state)
        if hit is not None:
            return hit
        out = bytearray()
        states = [state]
        cur = state
        while len(out) < self.max_bytes:
            byte = self.singular_byte(cur)
            if byte is None:
                break
            out.append(byte)
            cur = self.dfa.step(cur, byte)
            states.append(cur)
        cut = _char_boundary(bytes(out))
        result = (bytes(out[:cut]), states[cut])
        self._runs[state] = result
        return result

    def jump_string(self, state: int) -> str:
        """The forced text from ``state`` ("" when none)."""
        data, _ = self.run(state)
        return data.decode("utf-8") if data else ""


def _char_boundary(data: bytes) -> int:
    """Length of the longest prefix of ``data`` made of whole UTF-8 characters (0 when the
    data starts inside a character)."""
    if data and 0x80 <= data[0] < 0xC0:
        return 0  # starts with a continuation byte: the state is inside a character
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80:
            return end - back + 1 if back > 1 else end
        if byte >= 0xC0:  # lead byte: is its character complete?
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return end if back >= need else end - back
    return end
