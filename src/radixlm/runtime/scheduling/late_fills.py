"""Mask rows a step fills after its gate: the rows the gate did not copy (no gate was open, or
a request it did not check), timed as the step's fill loop and added to its mask time
(:mod:`.mask_wait_stats`)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from ...fsm.automaton import work_clock
from .mask_rows import StepMaskRows
from .mask_wait_stats import RunQueueClock
from .request import Req


@dataclass(frozen=True)
class LateFills:
    """Mask rows filled after the gate in one step: how many, the seconds they took, how
    many computed their mask, and of the seconds, off the CPU, in garbage collection, and
    the thread's CPU time."""

    rows: int = 0
    seconds: float = 0.0
    cold: int = 0
    preempted: float = 0.0
    gc_paused: float = 0.0
    cpu: float = 0.0

    def plus(self, other: LateFills) -> LateFills:
        return LateFills(self.rows + other.rows, self.seconds + other.seconds,
                         self.cold + other.cold, self.preempted + other.preempted,
                         self.gc_paused + other.gc_paused, self.cpu + other.cpu)


def fill_late(rows: StepMaskRows, reqs: Iterable[Req], clock: Callable[[], float],
              cpu_clock: Callable[[], float], run_queue: RunQueueClock) -> LateFills:
    """Fill ``reqs``' rows into the step's ``rows``, timed on ``clock`` and ``cpu_clock``."""
    start, cpu, off_cpu = clock(), cpu_clock(), run_queue.seconds()
    gc_before, cold_before, n = work_clock.gc_seconds(), rows.cold, 0
    for req in reqs:
        rows.fill(req)
        n += 1
    return LateFills(n, clock() - start, rows.cold - cold_before, run_queue.seconds() - off_cpu,
                     work_clock.gc_seconds() - gc_before, cpu_clock() - cpu)
