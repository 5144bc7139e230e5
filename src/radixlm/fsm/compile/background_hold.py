"""A latency-critical thread's claim on the GIL against the compiler's background work.

The compiler's worker computes masks and compiles grammars in Python, holding the GIL while
it does; the thread it shares the interpreter with (the scheduler) then waits for the GIL
whenever both want to run Python. While a holder has :meth:`BackgroundHold.hold` in force,
the worker parks at its next pause point (:meth:`BackgroundHold.point`: each automaton row a
mask builds, each mask of a warm-up slice, each deadline check of a compile), blocked on an
event (GIL released) until :meth:`BackgroundHold.release`. Nothing is lost: a mask or compile
resumes where it parked, and the parked time is off the worker's budgets
(:func:`..automaton.work_clock.charge_pause`). The holder lends the worker the interpreter
whenever it sleeps (release before, hold after), so what it sleeps for still gets computed.

A park lasts at most ``max_pause_seconds`` (a safety net: a holder that forgets to release
slows the worker, never stops it). Holds nest (a count): the worker runs when none is held.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..automaton import work_clock

MAX_PAUSE_SECONDS = 0.05  # one park at most: longer than a step's gate, shorter than a stall


class BackgroundHold:
    """Holds taken by one thread, pause points passed by the worker (see module doc)."""

    def __init__(self, max_pause_seconds: float = MAX_PAUSE_SECONDS) -> None:
        if not max_pause_seconds > 0:
            raise ValueError(f"max_pause_seconds must be > 0, got {max_pause_seconds}")
        self.max_pause_seconds = max_pause_seconds
        self._open = threading.Event()  # set while no hold is in force: the fast path
        self._open.set()
        self._lock = threading.Lock()
        self._holds = 0
        self._parked = threading.Condition(threading.Lock())  # notified when one parks
        self.pauses = 0  # parks so far (a worker that found a hold at a pause point)
        self.paused_seconds = 0.0  # time parked so far, in all
        self.parked_now = 0  # workers parked at this moment

    @property
    def held(self) -> bool:
        """Whether a hold is in force (the worker parks at its next pause point)."""
        return not self._open.is_set()

    def hold(self) -> None:
        """Keep the worker off the GIL from its next pause point until :meth:`release`."""
        with self._lock:
            self._holds += 1
            self._open.clear()

    def release(self) -> None:
        """End one :meth:`hold`; the worker resumes once none is left."""
        with self._lock:
            if self._holds == 0:
                raise RuntimeError("BackgroundHold.release() without a hold in force")
            self._holds -= 1
            if self._holds == 0:
                self._open.set()

    @contextmanager
    def holding(self) -> Iterator[None]:
        """:meth:`hold` for the ``with`` block."""
        self.hold()
        try:
            yield
        finally:
            self.release()

    def point(self) -> None:
        """A pause point of the worker: park (GIL released) while a hold is in force, at most
        ``max_pause_seconds``. About 50 ns when none is."""
        if self._open.is_set():
            return
        start = time.perf_counter()
        with self._parked:
            self.pauses += 1
            self.parked_now += 1
            self._parked.notify_all()
        try:
            self._open.wait(self.max_pause_seconds)
        finally:
            seconds = time.perf_counter() - start
            with self._parked:
                self.parked_now -= 1
                self.paused_seconds += seconds
            work_clock.charge_pause(seconds)

    def wait_parked(self, timeout: float, parks: int = 1) -> bool:
        """Block until ``parks`` parks have begun in all and a worker is parked now (for
        tests and tools: a hold's effect observed by events, not timing); False after
        ``timeout`` seconds without."""
        with self._parked:
            return self._parked.wait_for(
                lambda: self.pauses >= parks and self.parked_now > 0, timeout)
