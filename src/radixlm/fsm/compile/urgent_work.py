"""Which of the compiler worker's queued jobs decoding needs now, so that look-ahead gives way.

The worker (one thread, first in, first out) runs three kinds of work: what decoding waits
for now (a prefetched state's mask and closing row, a deferred advance, a jump-forward plan,
a closing distance), look-ahead (the masks of the states one token after a prefetched state)
and the breadth-first background warm-up. Look-ahead and warm-up are speculative: most of
what they compute is never visited, and one mask can take tens of milliseconds. Run in
front of a job decoding waits for, they made a stream wait for it: on one core a
jump-forward plan queued behind a prefetch slice's look-ahead waited 1.6 s
(``benchmarks/stream_gaps.py``, Handwritten---allIt4).

:class:`UrgentWork` counts the queued jobs decoding waits for: the plain calls
(:meth:`call_queued` / :meth:`call_started`) and the grammars whose prefetch slice is queued
(:meth:`slice_queued` / :meth:`slice_started`), whose own urgent work (their
``urgent_pending``) is read when asked. Speculative work checks :meth:`waiting` at its pause
points (each automaton row a mask builds, each mask) and stops there, the rows it built kept
(a later visit resumes), so that the urgent job runs first. Nothing it computes changes:
only when.
"""

from __future__ import annotations

import threading
from typing import Any


class UrgentWork:
    """The queued (not yet started) jobs of the worker that decoding waits for."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls = 0  # plain jobs queued: a jump-forward plan, a closing distance
        self._slices: dict[int, Any] = {}  # id -> grammar whose prefetch slice is queued

    def call_queued(self) -> None:
        """A job decoding waits for was queued."""
        with self._lock:
            self._calls += 1

    def call_started(self) -> None:
        """A job counted by :meth:`call_queued` started."""
        with self._lock:
            self._calls -= 1

    def slice_queued(self, grammar: Any) -> None:
        """``grammar``'s prefetch slice was queued (urgent while it has ``urgent_pending``)."""
        with self._lock:
            self._slices[id(grammar)] = grammar

    def slice_started(self, grammar: Any) -> None:
        """``grammar``'s queued prefetch slice started."""
        with self._lock:
            self._slices.pop(id(grammar), None)

    def waiting(self) -> bool:
        """Whether a queued job is one decoding waits for: a plain call, or the slice of a
        grammar with a prefetched state or a deferred advance to compute. A few hundred
        nanoseconds: checked at every pause point of speculative work."""
        if self._calls:
            return True
        if not self._slices:
            return False
        with self._lock:
            grammars = tuple(self._slices.values())
        return any(g.urgent_pending for g in grammars)
