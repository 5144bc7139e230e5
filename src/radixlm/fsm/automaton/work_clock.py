"""A clock that stops while Python's garbage collector runs: what the fsm's time budgets read.

A full collection in a process holding many grammars (millions of interned terms) takes
0.1-2 s, and it stops every Python thread while it runs, whichever thread triggered it. Timed
on the wall clock, a mask computation that a collection lands in fails its budget (0.5 s)
without having done more work; on this clock it is charged its own work only. The GC's time
is counted by a ``gc.callbacks`` hook installed on import (process-wide, a few hundred
nanoseconds per collection).

A thread that parks on purpose (the compiler's worker paused while the scheduler holds the GIL
for a step, :mod:`..compile.background_hold`) is not working either: :func:`charge_pause` takes that
time off the calling thread's clock, so a budget counts the grammar's work, not the waits.
"""

from __future__ import annotations

import gc
import threading
import time

_gc_seconds = 0.0  # collections finished so far, in all
_gc_started: float | None = None  # perf_counter time of the collection running now
_pauses = threading.local()  # .seconds: the calling thread's parked time (charge_pause)


def _on_gc(phase: str, info: dict) -> None:
    global _gc_seconds, _gc_started
    if phase == "start":
        _gc_started = time.perf_counter()
    elif _gc_started is not None:
        _gc_seconds += time.perf_counter() - _gc_started
        _gc_started = None


def gc_seconds() -> float:
    """Seconds the garbage collector has run since this module was imported."""
    return _gc_seconds


def charge_pause(seconds: float) -> None:
    """The calling thread was parked ``seconds`` on purpose: not work, off its clock."""
    _pauses.seconds = getattr(_pauses, "seconds", 0.0) + seconds


def now() -> float:
    """``time.perf_counter()`` less the garbage collector's time and the calling thread's
    pauses (seconds; only differences within one thread mean anything)."""
    return time.perf_counter() - _gc_seconds - getattr(_pauses, "seconds", 0.0)


if _on_gc not in gc.callbacks:
    gc.callbacks.append(_on_gc)
