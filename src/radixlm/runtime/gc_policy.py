"""The cyclic garbage collector in the scheduler process: freeze the start-up heap, time pauses.

A collection stops every thread of the process (the scheduler's step and the grammar
worker alike) for as long as it scans. A full (generation 2) collection scans every tracked
container left alive, and after start-up that is mostly the model, the tokenizer, the token
vocabulary and its trie: hundreds of thousands of objects that live as long as the process,
scanned again by every full collection. :func:`freeze_startup_heap` collects once and moves
them to the permanent generation (``gc.freeze``), so later collections scan only objects
made since. It also raises the young generation's threshold from Python's 700 container
allocations to :data:`YOUNG_THRESHOLD`: decoding allocates fast (token lists, masks, grammar
states), so at 700 the collector ran every few milliseconds and, ten young collections per
middle one and ten middle per full, reached full collections within seconds. The collector
stays on: grammars compiled while serving hold reference cycles (their term graphs) and are
still reclaimed when the grammar cache evicts them.

:class:`GcPauseStats` times every collection through ``gc.callbacks`` (the callback runs in
whichever thread triggered it; collections never overlap, so one start time suffices) over a
bounded window, for ``/get_server_info``.
"""

from __future__ import annotations

import gc
import time
from collections import deque
from typing import Any

WINDOW = 4096  # recent collections kept: bounded memory on a long-running server
# Container allocations (less frees) between young collections. Measured end to end
# (json_e2e.py --scheduler smollm2, 8 hard schemas, frozen heap): 700 -> 1,332 collections,
# 7 full, the longest 541 ms; 20,000 -> 45 collections, none full, the longest 44 ms. The cost:
# up to this many young objects (a few MB) wait longer to be scanned.
YOUNG_THRESHOLD = 20_000


def freeze_startup_heap() -> int:
    """Collect once, exclude every object still alive from later collections and raise the
    young generation's threshold to :data:`YOUNG_THRESHOLD` (the older two unchanged).

    Call after the model, tokenizer and scheduler are built and before serving. Returns the
    number of objects frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    return gc.get_freeze_count()


class GcPauseStats:
    """Durations of the collector's pauses in this process, per generation."""

    def __init__(self) -> None:
        self.pauses: deque[float] = deque(maxlen=WINDOW)  # seconds, recent collections
        self.counts = [0, 0, 0]  # collections since install, by generation
        self.total_seconds = 0.0  # since install
        self.max_full_seconds = 0.0  # the longest generation-2 collection since install
        self._start: float | None = None
        self._installed = False

    def install(self) -> None:
        """Start timing collections (idempotent)."""
        if not self._installed:
            gc.callbacks.append(self._on_gc)
            self._installed = True

    def uninstall(self) -> None:
        """Stop timing collections."""
        if self._installed:
            gc.callbacks.remove(self._on_gc)
            self._installed = False

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        now = time.perf_counter()
        if phase == "start":
            self._start = now
            return
        if self._start is None:  # installed mid-collection
            return
        seconds, self._start = now - self._start, None
        generation = int(info.get("generation", 2))
        self.pauses.append(seconds)
        self.counts[generation] += 1
        self.total_seconds += seconds
        if generation == 2:
            self.max_full_seconds = max(self.max_full_seconds, seconds)

    def summary(self) -> dict[str, float | int]:
        """Counts and total since install; p99 / max in milliseconds over the recent window;
        the frozen object count and the collector's thresholds."""
        values = sorted(self.pauses)
        p99 = values[min(len(values) - 1, int(0.99 * len(values)))] if values else 0.0
        return {
            "gc_pauses": sum(self.counts),
            "gc_full_pauses": self.counts[2],
            "gc_pause_ms_p99": 1e3 * p99,
            "gc_pause_ms_max": 1e3 * (values[-1] if values else 0.0),
            "gc_full_pause_ms_max": 1e3 * self.max_full_seconds,
            "gc_pause_ms_total": 1e3 * self.total_seconds,
            "gc_frozen_objects": gc.get_freeze_count(),
            "gc_enabled": gc.isenabled(),
            "gc_threshold": list(gc.get_threshold()),
        }
