"""How long the scheduler's steps wait for token masks: the constrained-decoding critical path.

A mask the background warm-up (or a prefetch) already computed costs a copy (about a
microsecond); one it had not is computed inside the step and stalls the whole batch. This
records, per step that applied masks, the wall time of the fill loop and how many fills found
no mask ready, over a bounded window of recent steps, so ``/get_server_info`` can report how
often and how long the scheduler waited (p50 / p99 / max).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

WINDOW = 4096  # recent steps kept: bounded memory on a long-running server


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


@dataclass
class MaskWaitStats:
    """Per-step mask fill times (seconds) and cold fills, over the last ``WINDOW`` steps."""

    step_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    steps: int = 0  # steps that applied at least one mask, since start
    cold_fills: int = 0  # fills that found no mask ready, since start

    def record(self, seconds: float, cold: int) -> None:
        """One step's fill loop took ``seconds``, ``cold`` of its fills computed a mask."""
        self.step_seconds.append(seconds)
        self.steps += 1
        self.cold_fills += cold

    def summary(self) -> dict[str, float | int]:
        """Counts since start; p50 / p99 / max in milliseconds over the recent window."""
        values = sorted(self.step_seconds)
        return {
            "mask_wait_steps": self.steps,
            "mask_wait_cold_fills": self.cold_fills,
            "mask_wait_ms_p50": 1e3 * _percentile(values, 0.50),
            "mask_wait_ms_p99": 1e3 * _percentile(values, 0.99),
            "mask_wait_ms_max": 1e3 * (values[-1] if values else 0.0),
        }
