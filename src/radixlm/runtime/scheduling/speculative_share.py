"""Whether the grammar worker's speculative work may run while the scheduler steps.

The grammar compiler's worker thread computes masks in Python beside the scheduler (the
forward releases the GIL). What decoding needs next (the mask and closing row of each
request's new state, a deferred advance, a jump-forward plan) must be computed anyway; the
worker's speculative work need not: the look-ahead (the masks of the states one token past
each request's state, most never visited) and the breadth-first warm-up. On a machine with
a core to spare it runs there, beside the forward, for free. Where the forward's threads
take every core this process may run on (``taskset`` to one core, one torch thread), it
takes its CPU time from the step: a stream's every gap grew by it, for masks the stream
never used (``benchmarks/stream_gaps.py``: the first steps of each stream carried ~7 ms of
breadth-first warm-up each). There, :class:`SpeculativeShare` holds the speculative work
off through each forward (it parks at its next pause point, the rows it built kept:
:mod:`radixlm.fsm.compile.background_hold`); it runs while the scheduler samples, advances
and sleeps. Only the forward: a parked speculative mask keeps the automaton's lock, and the
scheduler's own grammar work (a verify's draft masks, an advance building a row) waits for
that lock, so a hold over the whole step made each such wait last a park (a speculative
JSON run at batch 1 went 7x slower). Masks are the same either way: only when the
speculative ones are computed changes.
"""

from __future__ import annotations

import os
from typing import Any


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; all of them where unknown)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # no affinity on this platform
        return os.cpu_count() or 1


class SpeculativeShare:
    """Whether the forward leaves a core to the grammar worker's speculative work, and the
    hold kept through each step where it does not (see module doc)."""

    def __init__(self, forward_threads: int, cores: int | None = None) -> None:
        self.cores = cores if cores is not None else usable_cores()
        self.spare_core = self.cores > forward_threads
        self._held: Any | None = None  # the hold in force (a compiler's ``speculative``)

    @property
    def holding(self) -> bool:
        """Whether the speculative work is held off now."""
        return self._held is not None

    def forward_started(self, compiler: Any | None) -> None:
        """A forward starts: hold ``compiler``'s speculative work off where no core is spare
        (nothing before the compiler is built; once per forward, however often called)."""
        if compiler is None or self.spare_core or self._held is not None:
            return
        hold = getattr(compiler, "speculative", None)  # a stand-in compiler may have none
        if hold is not None:
            hold.hold()
            self._held = hold

    def forward_ended(self) -> None:
        """The forward is over: the speculative work may run."""
        held, self._held = self._held, None
        if held is not None:
            held.release()
