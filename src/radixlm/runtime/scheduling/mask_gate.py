"""The bound on how long one scheduler step waits for token masks (``--grammar-mask-wait-ms``).

A constrained request takes part in a step only if the mask of its current state is ready, so
that the step's fill is a copy (about a microsecond). Before the forward, each such request's
mask is checked; one not ready is waited for (sleeping, so the compiler's worker thread can
compute it) until the step's deadline, shared by all requests of the step. Still not ready,
the request is *held*: left out of this step (the others proceed), its mask asked for again at
the front of the worker's queue. It rejoins the first step in which its mask is ready.

The bound is on the time the scheduler is blocked, not on the time it sleeps: a sleep that
times out is not over when the timer fires. The thread must be woken (tens of microseconds)
and take the GIL back from the compiler's worker, which holds it while it builds automaton
rows in Python (up to the switch interval, then the worker's next bytecode boundary): measured
0.1-0.4 ms past the timeout on a 49k vocabulary (``benchmarks/json_e2e.py --scheduler``), so a
1 ms bound slept to the end blocked 1.1-1.6 ms. The deadline of the sleeping is therefore
:func:`wake_reserve` before the bound: the wake-up is paid inside it. What no reserve covers
is a loaded host: the OS may keep the scheduler thread off the CPU (counted apart, see
:mod:`mask_wait_stats`) or the worker while it holds the GIL (the scheduler then waits for
it, counted in neither: seen as 0.4-5 ms stalls with load 4-5 on 2 cores).

Holding changes no token: a held request's grammar state, KV and output are untouched, and the
step it rejoins computes the logits it would have computed in the step it missed. The cost is
latency for that request alone (a step per hold), against up to a whole mask computation
(10-100 ms on hard schemas) stalling every request of the batch.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ...fsm import work_clock
from .mask_wait_stats import MaskWaitStats, RunQueueClock
from .request import Req

WAKE_RESERVE_SECONDS = 0.0005  # the slowest wake-up measured (0.4 ms) with some margin


def wake_reserve(bound: float) -> float:
    """Seconds of the step's ``bound`` kept for waking up from the wait (see the module doc):
    :data:`WAKE_RESERVE_SECONDS`, or half the bound when that is smaller (a short bound
    still sleeps some)."""
    return min(WAKE_RESERVE_SECONDS, bound / 2)


class StepMaskGate:
    """One step's admission of constrained requests by mask readiness (see module doc).

    The owner asks :meth:`ready` for each request it would run in the step, and leaves out the
    ones it says False for; :meth:`close` then records the step's wait and holds.
    """

    def __init__(self, bound_seconds: float, stats: MaskWaitStats,
                 prefetch: Callable[[Req], None], run_queue: RunQueueClock | None = None
                 ) -> None:
        self.bound = bound_seconds
        self.sleep_bound = bound_seconds - wake_reserve(bound_seconds)  # see wake_reserve
        self.run_queue = run_queue or RunQueueClock()
        self.stats = stats
        self.prefetch = prefetch  # asks the worker for a held request's mask, first
        self.recorded = False  # the wait went into the stats (with the step's fill loop)
        self.deadline: float | None = None  # set at the first mask not ready (for sleeping)
        self.waited = 0.0  # seconds this step slept waiting for masks
        self.preempted = 0.0  # of them, runnable but kept off the CPU by the OS
        self.gc_paused = 0.0  # of them, the garbage collector running (any thread's)
        self.checked = 0  # constrained requests checked
        self.held: list[Req] = []

    def ready(self, req: Req) -> bool:
        """Whether ``req`` may run in this step: unconstrained (or its constraint not active
        yet), or its mask is ready now or before the step's deadline. False holds it."""
        matcher = req.grammar
        if matcher is None or not req.grammar_active:
            return True
        self.checked += 1
        if matcher.mask_ready() or self._wait(req):
            if req.mask_held_steps:
                self.stats.rejoined(req.mask_held_steps)
                req.mask_held_steps = 0
            return True
        req.mask_held_steps += 1
        self.held.append(req)
        self.prefetch(req)  # in case the warm-up's queue moved past it: to the front again
        return False

    def _wait(self, req: Req) -> bool:
        now = time.perf_counter()
        if self.deadline is None:
            self.deadline = now + self.sleep_bound
        left = self.deadline - now
        if left <= 0:
            return False
        off_cpu, gc_before = self.run_queue.seconds(), work_clock.gc_seconds()
        try:
            return bool(req.grammar.wait_mask_ready(left))
        finally:
            self.waited += time.perf_counter() - now
            self.preempted += self.run_queue.seconds() - off_cpu
            self.gc_paused += work_clock.gc_seconds() - gc_before
