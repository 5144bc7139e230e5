"""Quick compiles before slow ones: a compile past its quick share of work yields to the rest.

The compiler runs each compile on a thread of its own pool, so a quick compile never queues
behind a slow one; but threads share the interpreter, so a slow compile would still halve a
quick one's speed. Every compile starts in the quick lane when it is asked for; once it has
taken more than ``quick_steps`` work steps (:class:`.compile_clock.CompileClock`) it moves
to the slow lane, and from then on, at each of its pause points, it parks (the GIL released)
while any compile of the quick lane is queued or runs (as long as the slow ones leave a
thread of the pool for it). The parked time is off its clock
(:func:`work_clock.charge_pause`): its verdict counts steps, not waits. A slow compile waits
only for quick ones, short by definition, so nothing waits forever; slow compiles share the
CPU among themselves.
"""

from __future__ import annotations

import threading
import time

from ..automaton import work_clock
from .compile_clock import CompileClock

QUICK_COMPILE_STEPS = 50_000  # about 50-75 ms of work: most of the corpus compiles within it


class CompileTicket:
    """One compile's place in the lanes (quick until it passes the quick share)."""

    __slots__ = ("slow",)

    def __init__(self) -> None:
        self.slow = False


class CompileLanes:
    """The quick and slow lanes of one compiler's compiles (see module doc)."""

    def __init__(self, workers: int, quick_steps: int = QUICK_COMPILE_STEPS) -> None:
        if quick_steps < 0:
            raise ValueError(f"quick_steps must be >= 0, got {quick_steps}")
        self.workers = workers  # threads of the compile pool
        self.quick_steps = quick_steps
        self._changed = threading.Condition(threading.Lock())
        self.quick_running = 0  # compiles in the quick lane now
        self.slow_running = 0  # compiles in the slow lane now
        self.yields = 0  # parks of slow compiles for quick ones, so far

    def start(self) -> CompileTicket:
        """A compile is asked for (in the quick lane from then on, queued or running: a slow
        compile yields to it at once)."""
        with self._changed:
            self.quick_running += 1
        return CompileTicket()

    def finish(self, ticket: CompileTicket) -> None:
        """A compile ended (compiled or refused)."""
        with self._changed:
            if ticket.slow:
                self.slow_running -= 1
            else:
                self.quick_running -= 1
            self._changed.notify_all()

    def pause(self, ticket: CompileTicket, clock: CompileClock) -> None:
        """A pause point of the compile holding ``ticket``: move it to the slow lane once
        past the quick share, then park while quick compiles run."""
        if not ticket.slow:
            if clock.steps <= self.quick_steps:
                return
            with self._changed:
                ticket.slow = True
                self.quick_running -= 1
                self.slow_running += 1
                self._changed.notify_all()
        if not self.quick_running:  # the common case: nothing to yield to, no lock
            return
        start = time.perf_counter()
        with self._changed:
            if self._must_yield():
                self.yields += 1
            while self._must_yield():
                self._changed.wait(_PARK_SECONDS)
        work_clock.charge_pause(time.perf_counter() - start)

    def _must_yield(self) -> bool:
        # a quick compile waits (queued or running) and a thread is left for it: the slow
        # ones hold fewer threads than the pool has (else they would wait for one another)
        return self.quick_running > 0 and self.slow_running < self.workers

    def wait_slow(self, count: int, timeout: float) -> bool:
        """Block until ``count`` compiles are in the slow lane at once (for tests and tools:
        the lanes observed by events, not timing); False after ``timeout`` seconds."""
        with self._changed:
            return self._changed.wait_for(lambda: self.slow_running >= count, timeout)


_PARK_SECONDS = 0.05  # a parked slow compile rechecks this often (it is notified anyway)
