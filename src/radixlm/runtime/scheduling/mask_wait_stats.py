"""How long the scheduler's steps wait for token masks: the constrained-decoding critical path.

A mask the background warm-up (or a prefetch) already computed costs a copy (about a
microsecond). One that is not ready is waited for, at most ``--grammar-mask-wait-ms`` per
step (:mod:`mask_gate`); a request whose mask is still not ready is held out of the step. This
records, per step that checked or applied masks, the wall time spent on masks (the gate's
checks, sleeping and copies, and any row filled after it), and how many fills found no mask
ready (computed in the step: the gate makes that rare), over a bounded window of recent
steps; and the holds: request-steps held, holds ended by the request rejoining, the longest,
and the time the scheduler slept with nothing but held requests to run. ``/get_server_info``
reports them, with the two parts of a step's time apart: the gate's sleeping alone, wake-ups
included (``mask_gate_ms_*``), and the rest, checking and copying masks (``mask_fill_ms_*``).
Apart from the steps, each accepted token's grammar advance (accept, end check, jump-forward
plan) is timed too (``grammar_advance_ms_*``): scheduler time outside the gate. An advance
that would build automaton rows is not made there but handed to the compiler's worker
(``grammar_advances_deferred``; its check is timed as an advance, and the advance again when
the gate finds it ready), the request held meanwhile like one whose mask is not ready
(unless ``--grammar-advance-inline``). The scheduler's whole grammar time in a step, its masks
and its advances together, is reported per step too (``grammar_step_ms_*``), and less the
time the OS kept the scheduler off the CPU (``grammar_step_ms_*_not_preempted``, the advances'
share read as the gate's is: see :meth:`MaskWaitStats.advanced`), and as the scheduler
thread's CPU time (``grammar_step_ms_*_thread_cpu``: what its own work cost, whatever else ran
on the core; the gate's sleeping for the worker takes none, so it is not in it).
A garbage collection stops every thread, so one running while a step waits or fills (started
by the scheduler or by the compiler's worker allocating automaton terms) is in that step's
time: kept there, and counted apart too (steps with one, the longest inside one step).

On a loaded host the OS may take the CPU from the scheduler in the middle of a fill loop (a
CPU-bound process waits its turn on the run queue for milliseconds): that is no mask's
doing. Where Linux reports it (``/proc/thread-self/schedstat``), the time the thread spent
runnable but not running is subtracted too, reported as ``mask_wait_ms_*_not_preempted``.
"""

from __future__ import annotations

import ctypes
import os
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

WINDOW = 4096  # recent steps kept: bounded memory on a long-running server


def _percentile(sorted_values: list[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


def _gil_holding_pread() -> Callable[..., int] | None:
    """libc's ``pread`` called through ``ctypes.PyDLL``, which keeps the GIL during the call;
    None where there is no such libc. ``os.pread`` releases the GIL like every ``os`` call,
    and getting it back from the grammar compiler's worker thread (building automaton rows
    in Python) takes up to the switch interval: measured as ~0.2 ms added to every step's
    fill loop, the time this clock exists to report. A 128-byte read of a proc file does not
    block, so holding the GIL through it costs nothing."""
    try:
        fn = ctypes.PyDLL(None).pread
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_long)
    fn.restype = ctypes.c_ssize_t
    return fn


_PREAD = _gil_holding_pread()


class RunQueueClock:
    """Seconds the calling thread has spent runnable but not running (Linux schedstat's
    run_delay); 0.0 where unavailable. Open it from the thread it measures. A read keeps the
    GIL (see :func:`_gil_holding_pread`), so reading the clock does not itself hand the
    scheduler's thread to another one."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._failed = False
        self._buf = ctypes.create_string_buffer(128)

    def seconds(self) -> float:
        if self._fd is None and not self._failed:
            try:
                self._fd = os.open("/proc/thread-self/schedstat", os.O_RDONLY)
            except OSError:
                self._failed = True
        if self._fd is None:
            return 0.0
        try:
            return int(self._read().split()[1]) / 1e9  # ~1 us a read
        except (OSError, IndexError, ValueError):
            return 0.0

    def _read(self) -> bytes:
        if _PREAD is None:
            return os.pread(self._fd, 128, 0)
        n = _PREAD(self._fd, self._buf, 128, 0)
        if n < 0:
            raise OSError(ctypes.get_errno(), "pread of schedstat failed")
        return self._buf.raw[:n]


@dataclass
class MaskWaitStats:
    """Per-step mask wait times (seconds) and cold fills, over the last ``WINDOW`` steps;
    hold counts since start."""

    step_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    # the same steps less the time the OS kept the scheduler thread off the CPU
    step_seconds_not_preempted: deque[float] = field(
        default_factory=lambda: deque(maxlen=WINDOW))
    # of each step's time, the gate's wait before the forward (the rest is the fill loop)
    gate_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    # of each step's time, waiting for the GIL held by the compiler's worker (awake, in the
    # gate: what it took before it parked at a pause point)
    blocked_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    steps: int = 0  # steps that checked or applied at least one mask, since start
    gate_sleeps: int = 0  # of them, steps whose gate slept for a mask, since start
    cold_fills: int = 0  # fills that found no mask ready, since start
    held_steps: int = 0  # (request, step) pairs held out for a mask not ready
    holds: int = 0  # holds that ended with the request rejoining a step
    max_hold_steps: int = 0  # the longest of those, in steps
    idle_wait_seconds: float = 0.0  # slept with only held requests to run (no step ran)
    gc_steps: int = 0  # steps whose recorded time a garbage collection ran in, since start
    gc_max_seconds: float = 0.0  # the longest collection time inside one step's, since start
    # per accepted token, the scheduler's time advancing the grammar (accepting the token,
    # asking whether only EOS can follow, planning a jump-forward): outside the mask gate,
    # and it may build automaton rows (a state whose mask was shared through its clamped key
    # has not had its own rows built) or wait for a grammar's lock the worker holds
    advance_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    deferred_advances: int = 0  # of them, handed to the compiler's worker, since start
    # per step with grammar work, its mask time (as step_seconds) plus its advances' times
    grammar_step_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    # the same less the time the OS kept the scheduler off the CPU
    grammar_step_seconds_not_preempted: deque[float] = field(
        default_factory=lambda: deque(maxlen=WINDOW))
    # the same steps' CPU time on the scheduler's thread (where the callers measured it)
    grammar_step_cpu_seconds: deque[float] = field(default_factory=lambda: deque(maxlen=WINDOW))
    # the open step's mask time once recorded, and its advances' time once one is made
    _step_masks: float | None = field(default=None, init=False, repr=False)
    _step_advances: float | None = field(default=None, init=False, repr=False)
    _step_preempted: float = field(default=0.0, init=False, repr=False)  # of both, the OS's
    _step_cpu: float = field(default=0.0, init=False, repr=False)  # of both, the thread's CPU

    def record(self, seconds: float, cold: int, preempted: float = 0.0,
               gate: float = 0.0, gc_paused: float = 0.0, blocked: float = 0.0,
               cpu: float = 0.0) -> None:
        """One step waited ``seconds`` for masks (filling included), ``preempted`` of them
        off the CPU (the OS's doing), ``gate`` of them in the gate's wait before the forward,
        ``gc_paused`` of them in garbage collections, ``blocked`` of them for the GIL held
        by the compiler's worker; ``cold`` of its fills computed a mask; ``cpu``: the
        scheduler thread's CPU time in those ``seconds``."""
        if gc_paused > 0:
            self.gc_steps += 1
            self.gc_max_seconds = max(self.gc_max_seconds, gc_paused)
        self.step_seconds.append(seconds)
        self.gate_seconds.append(gate)
        self.blocked_seconds.append(blocked)
        self.gate_sleeps += gate > 0
        self.step_seconds_not_preempted.append(max(0.0, seconds - preempted))
        self.steps += 1
        self.cold_fills += cold
        self._step_masks = (self._step_masks or 0.0) + seconds
        self._step_preempted += min(preempted, seconds)
        self._step_cpu += cpu

    def advanced(self, seconds: float, preempted: float = 0.0, cpu: float = 0.0) -> None:
        """One token's grammar advance took ``seconds`` on the scheduler's thread,
        ``preempted`` of them runnable but off the CPU (the OS's doing, not the advance's),
        ``cpu`` of the thread's CPU time."""
        self.advance_seconds.append(seconds)
        self._step_advances = (self._step_advances or 0.0) + seconds
        self._step_preempted += min(preempted, seconds)
        self._step_cpu += cpu

    def deferred(self, seconds: float, preempted: float = 0.0, cpu: float = 0.0) -> None:
        """One token's advance was found to need automaton rows (the check took
        ``seconds``) and was handed to the compiler's worker; it is timed again when made."""
        self.deferred_advances += 1
        self.advanced(seconds, preempted, cpu)

    def close_step(self) -> None:
        """The step's grammar work is over: its mask time (:meth:`record`) and its advances'
        (:meth:`advanced`, :meth:`deferred`) since the last close are one step's grammar time;
        a step that did neither records none."""
        if self._step_masks is None and self._step_advances is None:
            return
        total = (self._step_masks or 0.0) + (self._step_advances or 0.0)
        self.grammar_step_seconds.append(total)
        self.grammar_step_seconds_not_preempted.append(max(0.0, total - self._step_preempted))
        self.grammar_step_cpu_seconds.append(self._step_cpu)
        self._step_masks = self._step_advances = None
        self._step_preempted = self._step_cpu = 0.0

    def held(self, n: int) -> None:
        """``n`` requests were held out of one step."""
        self.held_steps += n

    def rejoined(self, steps: int) -> None:
        """A request held ``steps`` consecutive steps has its mask and runs again."""
        self.holds += 1
        self.max_hold_steps = max(self.max_hold_steps, steps)

    def cpu_summary(self) -> dict[str, float]:
        """The steps' grammar time as the scheduler thread's CPU time: p50 / p99 / max in
        milliseconds over the recent window."""
        cpu = sorted(self.grammar_step_cpu_seconds)
        return {"grammar_step_ms_p50_thread_cpu": 1e3 * _percentile(cpu, 0.50),
                "grammar_step_ms_p99_thread_cpu": 1e3 * _percentile(cpu, 0.99),
                "grammar_step_ms_max_thread_cpu": 1e3 * (cpu[-1] if cpu else 0.0)}

    def summary(self) -> dict[str, float | int]:
        """Counts since start; p50 / p99 / max in milliseconds over the recent window."""
        values = sorted(self.step_seconds)
        own = sorted(self.step_seconds_not_preempted)
        gate = sorted(self.gate_seconds)
        blocked = sorted(self.blocked_seconds)
        fill = sorted(t - g for t, g in zip(self.step_seconds, self.gate_seconds, strict=True))
        advance = sorted(self.advance_seconds)
        grammar = sorted(self.grammar_step_seconds)
        grammar_own = sorted(self.grammar_step_seconds_not_preempted)
        return {
            "mask_wait_steps": self.steps,
            "mask_wait_cold_fills": self.cold_fills,
            "mask_wait_ms_p50": 1e3 * _percentile(values, 0.50),
            "mask_wait_ms_p99": 1e3 * _percentile(values, 0.99),
            "mask_wait_ms_max": 1e3 * (values[-1] if values else 0.0),
            "mask_wait_ms_p99_not_preempted": 1e3 * _percentile(own, 0.99),
            "mask_wait_ms_max_not_preempted": 1e3 * (own[-1] if own else 0.0),
            "mask_gate_ms_p99": 1e3 * _percentile(gate, 0.99),
            "mask_gate_ms_max": 1e3 * (gate[-1] if gate else 0.0),
            "mask_fill_ms_p50": 1e3 * _percentile(fill, 0.50),
            "mask_fill_ms_p99": 1e3 * _percentile(fill, 0.99),
            "mask_gate_sleeps": self.gate_sleeps,
            "mask_blocked_ms_p99": 1e3 * _percentile(blocked, 0.99),
            "mask_blocked_ms_max": 1e3 * (blocked[-1] if blocked else 0.0),
            "mask_wait_steps_with_gc": self.gc_steps,
            "mask_wait_gc_ms_max": 1e3 * self.gc_max_seconds,
            "mask_held_steps": self.held_steps,
            "mask_holds": self.holds,
            "mask_max_hold_steps": self.max_hold_steps,
            "mask_idle_wait_ms": 1e3 * self.idle_wait_seconds,
            "grammar_advances": len(advance),
            "grammar_advances_deferred": self.deferred_advances,
            "grammar_advance_ms_p50": 1e3 * _percentile(advance, 0.50),
            "grammar_advance_ms_p99": 1e3 * _percentile(advance, 0.99),
            "grammar_advance_ms_max": 1e3 * (advance[-1] if advance else 0.0),
            "grammar_steps": len(grammar),
            "grammar_step_ms_p50": 1e3 * _percentile(grammar, 0.50),
            "grammar_step_ms_p99": 1e3 * _percentile(grammar, 0.99),
            "grammar_step_ms_max": 1e3 * (grammar[-1] if grammar else 0.0),
            "grammar_step_ms_p50_not_preempted": 1e3 * _percentile(grammar_own, 0.50),
            "grammar_step_ms_p99_not_preempted": 1e3 * _percentile(grammar_own, 0.99),
            "grammar_step_ms_max_not_preempted": 1e3 * (grammar_own[-1] if grammar_own else 0.0),
        }
