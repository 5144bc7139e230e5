"""The bound on how long one scheduler step waits for token masks (``--grammar-mask-wait-ms``).

A constrained request takes part in a step only if the mask of its current state is ready, so
that the step's fill is a copy (microseconds). Before the forward, each such request's mask is
checked; one not ready is waited for (sleeping, so the compiler's worker thread can compute
it) with what is left of the step's bound, shared by all requests of the step. Still not ready,
the request is *held*: left out of this step (the others proceed), its mask asked for again at
the front of the worker's queue. It rejoins the first step in which its mask is ready.

The bound is on all the time the step spends on masks: the gate's checks, its sleeping and the
copies of the ready masks into the step's bitmask rows, which the gate makes as it admits each
request (:mod:`mask_rows`), so that nothing is left to fill after the forward. The sleeping is
budgeted on that time (what the step spent on masks so far, copies included), not on a wall
deadline, and stops a reserve short of the bound (:mod:`gate_reserve`): a sleep that times out
is not over when the timer fires. The thread must be woken (tens of microseconds) and take the
GIL back from the compiler's worker, which holds it while it builds automaton rows in Python
(measured 0.1-0.4 ms past the timeout on a 49k vocabulary, ``benchmarks/json_e2e.py
--scheduler``), and the requests checked after the sleep are still to be copied. While it
sleeps the gate lowers the interpreter's switch interval (:data:`WAKE_SWITCH_SECONDS`), so
that taking the GIL back costs that long, not the scheduler's usual 0.2 ms. What no reserve
covers is a loaded host: the OS may keep the scheduler thread off the CPU (counted apart, see
:mod:`mask_wait_stats`).

From its first check to :meth:`StepMaskGate.leave` (the scheduler calls it after its last
check, before the forward) the gate holds the compiler's worker off the GIL
(``fsm.BackgroundHold``): the worker parks at its next pause point, so the checks and copies
do not wait for the GIL behind a mask being built in Python (such waits, ``blocked``, were
0.4-5 ms stalls on a loaded host). The gate lends the worker the GIL while it sleeps (release,
then hold again), so the mask it sleeps for is still computed. What the worker still takes
before it parks is counted (``blocked``) but not learnt by the reserve: it is not the checks'
own cost, and learnt it would stop the gate from sleeping for a whole window.

Holding changes no token: a held request's grammar state, KV and output are untouched, and the
step it rejoins computes the logits it would have computed in the step it missed. The cost is
latency for that request alone (a step per hold), against up to a whole mask computation
(10-100 ms on hard schemas) stalling every request of the batch.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ...fsm import BackgroundHold
from ...fsm.automaton import work_clock
from .gate_reserve import GateReserve
from .mask_wait_stats import MaskWaitStats, RunQueueClock
from .request import Req

# The switch interval while the gate sleeps: when the sleep ends, the scheduler thread waits
# this long for the worker to hand the GIL back before forcing it. Nothing else waits for the
# GIL meanwhile, so the worker pays no switches for it.
WAKE_SWITCH_SECONDS = 0.00002
# Off the CPU for longer than this outside the sleeping (in one check), the gate reads the
# run-queue clock to tell the OS's preemption from a wait for the GIL (a read costs 1-80 us,
# cold after a forward: not paid on every check).
OFF_CPU_CHECK_SECONDS = 0.00002


class StepMaskGate:
    """One step's admission of constrained requests by mask readiness (see module doc).

    The owner asks :meth:`ready` for each request it would run in the step, and leaves out the
    ones it says False for; a request admitted has its mask copied by ``fill`` at once. The
    manager records the step's time (:attr:`spent`) and holds when the step ends. ``clock``
    (wall) and ``cpu_clock`` (the thread's CPU time) are what the step is measured on;
    ``background``, the compiler's worker's hold, is in force from the first check to
    :meth:`leave` except while the gate sleeps.
    """

    def __init__(self, bound_seconds: float, stats: MaskWaitStats,
                 prefetch: Callable[[Req], None], fill: Callable[[Req], None],
                 reserve: GateReserve | None = None, run_queue: RunQueueClock | None = None,
                 clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 background: BackgroundHold | None = None) -> None:
        self.bound = bound_seconds
        self.reserve = reserve if reserve is not None else GateReserve()
        self.sleep_bound = bound_seconds - self.reserve.seconds(bound_seconds)
        self.run_queue = run_queue or RunQueueClock()
        self.stats = stats
        self.prefetch = prefetch  # asks the worker for a held request's mask, first
        self.fill = fill  # copies an admitted request's mask into the step's rows
        self.clock, self.cpu_clock = clock, cpu_clock
        self.background = background
        self._holding = False  # the worker's hold is in force (first check .. leave)
        self.spent = 0.0  # seconds in ready() for constrained requests: checks, sleeps, copies
        self.cpu_spent = 0.0  # of the thread's CPU time in them (sleeping takes none)
        self.waited = 0.0  # of them, sleeping for masks (the wake-up included)
        self.preempted = 0.0  # of them, runnable but kept off the CPU by the OS
        self.gc_paused = 0.0  # of them, the garbage collector running (any thread's)
        self.checked = 0  # constrained requests checked
        self.held: list[Req] = []
        self._asleep_off_cpu = 0.0  # off the CPU while sleeping (not preemption: the wait)
        self._late_wake: float | None = None  # slowest wake-up after a timed-out sleep
        self._asleep_preempted = 0.0  # of ``preempted``, while sleeping
        self._run_delay: float | None = None  # the run-queue clock's last reading
        self.blocked = 0.0  # off the CPU outside the sleeping, not preempted: the GIL's wait

    def ready(self, req: Req) -> bool:
        """Whether ``req`` may run in this step: unconstrained (or its constraint not active
        yet), or its mask is ready now or within what is left of the step's bound (then it
        is copied into the step's rows). False holds it; a request whose last token's grammar
        advance is still deferred (``grammar_pending``, see :meth:`advance_ready`) is held
        without a check."""
        matcher = req.grammar
        if matcher is None or not req.grammar_active:
            return True
        with self._measured() as start:
            if req.grammar_pending is None and self._mask_ready(req, start):
                self.fill(req)
                if req.mask_held_steps:
                    self.stats.rejoined(req.mask_held_steps)
                    req.mask_held_steps = 0
                return True
            self._hold(req)
            return False

    def _mask_ready(self, req: Req, start: float) -> bool:
        """Whether ``req``'s mask (and, closing within its budget, its closing row: see
        :mod:`.budget_closing`) is ready now or within what is left of the bound."""
        matcher = req.grammar
        if not req.grammar_closing:
            return matcher.mask_ready() or self._wait(start, matcher.wait_mask_ready)
        remaining = req.sampling.max_new_tokens - req.num_output  # as mask_rows cuts to
        return matcher.mask_ready(remaining) or self._wait(
            start, lambda left: matcher.wait_mask_ready(left, remaining))

    def advance_ready(self, req: Req) -> bool:
        """Whether the grammar advance ``req`` deferred to the compiler's worker (its
        ``grammar_pending``) can be made now without building automaton rows, or can within
        what is left of the step's bound (sleeping for the worker as for a mask). The owner
        then makes it before asking :meth:`ready`; False holds the request this step."""
        pending = req.grammar_pending
        matcher = req.grammar
        with self._measured() as start:
            return pending.ready(matcher) or self._wait(
                start, lambda left: pending.wait(matcher, left))

    def _hold(self, req: Req) -> None:
        req.mask_held_steps += 1
        self.held.append(req)
        self.prefetch(req)  # in case the warm-up's queue moved past it: to the front again

    @contextmanager
    def _measured(self) -> Iterator[float]:
        """Time one check (yields its start on ``clock``) into the step's mask time, with
        the worker held off the GIL from the step's first check on."""
        self.checked += 1
        if self._run_delay is None:  # once a step, outside the measured time
            self._run_delay = self.run_queue.seconds()
        if not self._holding and self.background is not None:
            self.background.hold()
            self._holding = True
        start, cpu, gc_before = self.clock(), self.cpu_clock(), work_clock.gc_seconds()
        asleep = self._asleep_off_cpu
        try:
            yield start
        finally:
            elapsed = self.clock() - start
            self.spent += elapsed
            used = self.cpu_clock() - cpu
            self.cpu_spent += used
            off_cpu = elapsed - used - (self._asleep_off_cpu - asleep)
            self.gc_paused += work_clock.gc_seconds() - gc_before
            if off_cpu > OFF_CPU_CHECK_SECONDS:
                self._off_cpu_awake(off_cpu)

    def _off_cpu_awake(self, seconds: float) -> None:
        """Split ``seconds`` off the CPU outside the sleeping (the copies do not block, but
        taking the GIL back from the compiler's worker does) into the OS's preemption, at
        most the run-queue delay since the clock's last reading, and the GIL's wait."""
        now = self.run_queue.seconds()
        preempted = min(seconds, max(0.0, now - (self._run_delay or now)))
        self._run_delay = now
        self.preempted += preempted
        self.blocked += seconds - preempted

    def leave(self) -> None:
        """The step's last check is done: the compiler's worker may run again (idempotent)."""
        if self._holding:
            self._holding = False
            self.background.release()

    @property
    def slept(self) -> bool:
        """Whether the gate slept for a mask in this step."""
        return self.waited > 0

    def close(self) -> None:
        """The step's checks are over: teach the reserve what its checks and copies cost,
        less what the OS (preemption) and the worker (the GIL's waits) took of them."""
        self.leave()
        if self.checked:
            preempted_awake = self.preempted - self._asleep_preempted  # the OS's, not the fill's
            own = self.spent - self.waited - preempted_awake - self.blocked
            self.reserve.learn(own, self._late_wake)

    def _wait(self, start: float, wait: Callable[[float], bool]) -> bool:
        """Sleep in ``wait`` (it returns True once ready) for what is left of the bound."""
        left = self.sleep_bound - self.spent - (self.clock() - start)
        if left <= 0:
            return False
        off_cpu = self.run_queue.seconds()
        interval = sys.getswitchinterval()
        sys.setswitchinterval(min(interval, WAKE_SWITCH_SECONDS))
        now, cpu = self.clock(), self.cpu_clock()
        ready = False
        if self._holding:  # the worker computes the mask slept for: lend it the GIL
            self.background.release()
        try:
            ready = bool(wait(left))
            return ready
        finally:
            if self._holding:
                self.background.hold()
            slept = self.clock() - now
            sys.setswitchinterval(interval)
            self.waited += slept
            self._asleep_off_cpu += slept - (self.cpu_clock() - cpu)
            self._run_delay = self.run_queue.seconds()
            preempted = self._run_delay - off_cpu
            self.preempted += preempted
            self._asleep_preempted += preempted
            if not ready:  # the OS's share is not the wake-up's (see mask_wait_stats)
                late = slept - left - preempted
                self._late_wake = max(late, self._late_wake or 0.0)
