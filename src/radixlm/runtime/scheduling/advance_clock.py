"""The clock of the scheduler's grammar advances: each one's wall time, and of it the OS's.

A token's grammar advance (accept, end check, jump-forward plan: :mod:`.grammar_manager`) is
timed on the wall clock, as the step's masks are. On a loaded host the OS may keep the
scheduler thread off the CPU in the middle of one (runnable, waiting for a core): that is no
grammar's doing, and :mod:`.mask_wait_stats` reports the steps' grammar time less it too. The
run-queue clock (``/proc/thread-self/schedstat``) is read once a step, before its first
advance, and again only after an advance that spent any time off the CPU (its wall time past
its thread CPU time), as the mask gate reads it (:data:`.mask_gate.OFF_CPU_CHECK_SECONDS`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from .mask_wait_stats import MaskWaitStats, RunQueueClock

# Off the CPU for longer than this in one advance, the run-queue clock is read to tell the
# OS's preemption from a wait for the GIL or a lock (a read costs 1-80 us: not paid on every
# advance). The mask gate's threshold (mask_gate.OFF_CPU_CHECK_SECONDS).
OFF_CPU_CHECK_SECONDS = 0.00002


class AdvanceClock:
    """Times advances on one thread (the scheduler's); :meth:`new_step` after each step."""

    def __init__(self, run_queue: RunQueueClock,
                 clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.run_queue = run_queue
        self.clock, self.cpu_clock = clock, cpu_clock
        self._run_delay: float | None = None  # the run-queue clock's last reading this step

    def start(self) -> tuple[float, float]:
        """The mark an advance starts at (wall, thread CPU)."""
        if self._run_delay is None:  # once a step, before its first advance
            self._run_delay = self.run_queue.seconds()
        return self.clock(), self.cpu_clock()

    def stop(self, mark: tuple[float, float]) -> tuple[float, float]:
        """(wall seconds since ``mark``, of them runnable but off the CPU)."""
        wall = self.clock() - mark[0]
        off_cpu = wall - (self.cpu_clock() - mark[1])
        if off_cpu <= OFF_CPU_CHECK_SECONDS or self._run_delay is None:
            return wall, 0.0
        now = self.run_queue.seconds()
        preempted = min(off_cpu, max(0.0, now - self._run_delay))
        self._run_delay = now
        return wall, preempted

    def record(self, stats: MaskWaitStats, mark: tuple[float, float],
               deferred: bool = False) -> None:
        """Record the advance begun at ``mark`` in ``stats`` (:meth:`MaskWaitStats.advanced`,
        or :meth:`MaskWaitStats.deferred`): its wall time, the OS's share, its CPU time."""
        wall, preempted = self.stop(mark)
        cpu = self.cpu_clock() - mark[1]
        (stats.deferred if deferred else stats.advanced)(wall, preempted, cpu=cpu)

    def new_step(self) -> None:
        """The step ended: the next advance reads the run-queue clock afresh."""
        self._run_delay = None
