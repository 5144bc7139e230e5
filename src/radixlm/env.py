"""Every environment variable radixlm reads, in one place.

Other modules never call ``os.environ`` themselves: they ask this module, so that a reader can
see every knob at a glance. ``fsm`` and ``kernels`` import nothing of ours; their settings arrive
as arguments from the runtime, which reads them here.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = [
    "cache_dir",
    "kernel_backend",
    "log_level",
    "num_threads_default",
    "omp_spin_waits",
    "triton_interpret",
]


def cache_dir() -> Path:
    """Root for built tiny models and compiled grammars (``RADIXLM_CACHE_DIR``)."""
    default = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "radixlm"
    return Path(os.environ.get("RADIXLM_CACHE_DIR", str(default))).expanduser()


def kernel_backend() -> str:
    """Kernel choice from ``RADIXLM_KERNEL_BACKEND``: ``auto`` (default), ``torch``,
    ``native``, ``triton``."""
    value = os.environ.get("RADIXLM_KERNEL_BACKEND", "auto").strip().lower()
    if value not in ("auto", "torch", "native", "triton"):
        raise ValueError(
            f"RADIXLM_KERNEL_BACKEND must be one of auto, torch, native, triton; got {value!r}"
        )
    return value


def num_threads_default() -> int:
    """Torch intra-op threads per process (``RADIXLM_NUM_THREADS``, default 1).

    The rule: 1 by default; more only up to the cores this process has to itself, and then
    with ``OMP_WAIT_POLICY=PASSIVE`` (read by OpenMP at start-up; :func:`omp_spin_waits`).
    Measured on a 2-core machine shared with other work (SmolLM2-135M decode, ms per step,
    float32 batch 1 / 32): 1 thread 81 / 336; 2 threads PASSIVE 129 / 324; 2 threads with
    OpenMP's default spin-waiting 2017 / 2897 (spinning threads fight the other processes for
    the cores). Benchmarks set the same value on both sides of a comparison.
    """
    raw = os.environ.get("RADIXLM_NUM_THREADS", "1")
    try:
        value = int(raw)
    except ValueError as exc:
        raise ValueError(f"RADIXLM_NUM_THREADS must be an integer, got {raw!r}") from exc
    if value < 1:
        raise ValueError(f"RADIXLM_NUM_THREADS must be >= 1, got {value}")
    return value


def omp_spin_waits() -> bool:
    """True unless ``OMP_WAIT_POLICY`` is ``PASSIVE``: OpenMP's idle threads then spin, which
    costs more than a second thread gains wherever the cores are shared (see
    :func:`num_threads_default`). Read only to warn; OpenMP reads it itself."""
    return os.environ.get("OMP_WAIT_POLICY", "").strip().upper() != "PASSIVE"


def log_level() -> str:
    """Logging level name (``RADIXLM_LOG_LEVEL``, default ``INFO``)."""
    return os.environ.get("RADIXLM_LOG_LEVEL", "INFO").upper()


def triton_interpret() -> bool:
    """True when Triton runs in its CPU interpreter (``TRITON_INTERPRET=1``, read by Triton)."""
    return os.environ.get("TRITON_INTERPRET", "0") == "1"
