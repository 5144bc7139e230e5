"""How much of a step's mask-wait bound the gate may not spend sleeping, learnt from recent steps.

A step's recorded time on masks is its checks and copies plus its sleeping plus the wake-up
after each sleep (the timer, then the GIL back from the compiler's worker). The gate sleeps only
what is left of the bound after a reserve for the parts it cannot cut short: a wake-up (the
time past the timeout asked, in the recent sleeps that timed out) and a step's own
check-and-copy time (all its requests: the ones checked after a sleep still have to be
copied). The gate teaches it only what is the step's own: not the OS's preemption, not the
GIL's waits for the worker (the gate holds the worker off the GIL, see :mod:`mask_gate`).

Each part is a high rank over the last :data:`WINDOW` steps, not their maximum: of every
:data:`OUTLIER_EVERY` steps in the window the slowest one is left out (below that many, the
maximum). So a one-off stall does not take the whole bound for a window's worth of steps (it
did: the gate then never slept and held every mask not ready at the first check), while a
cost that recurs is reserved. Before any history, :func:`wake_reserve` stands in for the
wake-up. A reserve of the whole bound means the gate does not sleep at all: a request whose
mask is not ready is held (its output does not change, see :mod:`mask_gate`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field

WAKE_RESERVE_SECONDS = 0.0005  # a wake-up before any was measured: the slowest seen, 0.4 ms
WINDOW = 32  # recent steps the reserve is taken over
OUTLIER_EVERY = 16  # of this many recent steps, the slowest is left out (a one-off stall)


def wake_reserve(bound: float) -> float:
    """The wake-up reserved before any was measured: :data:`WAKE_RESERVE_SECONDS`, or half the
    bound when that is smaller (a short bound still sleeps some)."""
    return min(WAKE_RESERVE_SECONDS, bound / 2)


def outliers(steps: int) -> int:
    """How many of the slowest of ``steps`` recent steps are taken for one-off stalls."""
    return steps // OUTLIER_EVERY


def high_rank(values: Iterable[float], steps: int) -> float | None:
    """The slowest of ``values`` (seen over ``steps`` recent steps) once the
    :func:`outliers` are left out; None when they are all outliers (or none was seen)."""
    ordered = sorted(values, reverse=True)
    k = outliers(steps)
    return ordered[k] if len(ordered) > k else None


@dataclass
class GateReserve:
    """The wake-ups and fill times of the last :data:`WINDOW` steps that checked masks
    (seconds; a wake-up is None for a step whose sleeps all ended with their mask, or that did
    not sleep); :meth:`seconds` is the reserve. Kept per step, not per sleep, so that a slow
    wake-up ages out even while the reserve it raised keeps the gate from sleeping."""

    wakes: deque[float | None] = field(default_factory=lambda: deque(maxlen=WINDOW))
    fills: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def wake_seconds(self, bound: float) -> float:
        """The wake-up reserved: a high rank of the recent ones (:func:`high_rank`), or
        :func:`wake_reserve` before any. Wake-ups seen too rarely to tell a stall from a
        pattern (all outliers) count at most :func:`wake_reserve`: a gate that stopped
        sleeping learns no new ones, so a stall must not keep it awake on its own."""
        seen = [w for w in self.wakes if w is not None]
        wake = high_rank(seen, len(self.wakes))
        if wake is not None:
            return wake
        return min(wake_reserve(bound), max(seen)) if seen else wake_reserve(bound)

    def fill_seconds(self) -> float:
        """The checks and copies reserved: a high rank of the recent steps' own (0 before
        any step)."""
        fill = high_rank(self.fills, len(self.fills))
        return 0.0 if fill is None else fill

    def seconds(self, bound: float) -> float:
        """What a step with this ``bound`` keeps from sleeping (at most the whole bound)."""
        return min(bound, self.wake_seconds(bound) + self.fill_seconds())

    def learn(self, fill: float, wake: float | None) -> None:
        """A step spent ``fill`` seconds of its own on masks besides sleeping (checks and
        copies), and its slowest sleep that timed out returned ``wake`` seconds after the
        timeout."""
        self.fills.append(max(0.0, fill))
        self.wakes.append(None if wake is None else max(0.0, wake))
