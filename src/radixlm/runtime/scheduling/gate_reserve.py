"""How much of a step's mask-wait bound the gate may not spend sleeping, learnt from recent steps.

A step's recorded time on masks is its checks and copies plus its sleeping plus the wake-up
after each sleep (the timer, then the GIL back from the compiler's worker). The gate sleeps only
what is left of the bound after a reserve for the parts it cannot cut short: the longest
wake-up seen in the recent sleeps that timed out (the time past the timeout asked), and the
longest check-and-copy time of a recent step (all its requests: the ones checked after a
sleep still have to be copied). Both are maxima over a short window, so one slow step raises
the reserve for a while and then ages out; before any history, :func:`wake_reserve` stands in
for the wake-up. A reserve of the whole bound means the gate does not sleep at all: a request
whose mask is not ready is held (its output does not change, see :mod:`mask_gate`).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

WAKE_RESERVE_SECONDS = 0.0005  # a wake-up before any was measured: the slowest seen, 0.4 ms
WINDOW = 32  # recent sleeps / steps the maxima are taken over


def wake_reserve(bound: float) -> float:
    """The wake-up reserved before any was measured: :data:`WAKE_RESERVE_SECONDS`, or half the
    bound when that is smaller (a short bound still sleeps some)."""
    return min(WAKE_RESERVE_SECONDS, bound / 2)


@dataclass
class GateReserve:
    """The wake-ups and fill times of the last :data:`WINDOW` steps that checked masks
    (seconds; a wake-up is None for a step whose sleeps all ended with their mask, or that did
    not sleep); :meth:`seconds` is the reserve. Kept per step, not per sleep, so that a slow
    wake-up ages out even while the reserve it raised keeps the gate from sleeping."""

    wakes: deque[float | None] = field(default_factory=lambda: deque(maxlen=WINDOW))
    fills: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))

    def seconds(self, bound: float) -> float:
        """What a step with this ``bound`` keeps from sleeping (at most the whole bound)."""
        seen = [w for w in self.wakes if w is not None]
        wake = max(seen) if seen else wake_reserve(bound)
        fill = max(self.fills) if self.fills else 0.0
        return min(bound, wake + fill)

    def learn(self, fill: float, wake: float | None) -> None:
        """A step spent ``fill`` seconds on masks besides sleeping (checks and copies), and
        its slowest sleep that timed out returned ``wake`` seconds after the timeout."""
        self.fills.append(max(0.0, fill))
        self.wakes.append(None if wake is None else max(0.0, wake))
