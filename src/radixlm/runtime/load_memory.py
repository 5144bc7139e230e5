"""Memory a server process holds after loading and no longer needs, given back.

Loading leaves two kinds of dead weight in a process:

* **build tables**: transformers 5 builds a BPE tokenizer's Rust model from Python copies of
  its vocabulary and merges (parsed from ``tokenizer.json``) and keeps them on the tokenizer
  (``_vocab``, ``_merges``); nothing reads them afterwards. For Gemma 3's 262,144 tokens and
  514,906 merges they are ~200 MiB of Python objects beside a ~65 MiB Rust tokenizer.
* **freed heap**: parsing (``tokenizer.json``, the GGUF's metadata) frees most of what it
  allocated, but glibc keeps the freed pages of its heap mapped (RSS) until ``malloc_trim``.

:func:`drop_build_tables` and :func:`release_freed_heap` give both back; neither changes
what the process computes (:func:`load_tokenizer` does both for a tokenizer a server process
loads for itself). :func:`limit_malloc_arenas` keeps a process' threads from holding freed
memory in arenas of their own. :class:`LoadSteps` says what the start-up memory is made of.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

# attributes transformers' BPE tokenizer classes (Gemma, Llama, Qwen2, ...) set in __init__ to
# build the Rust model from; only Whisper's save_vocabulary reads ``_merges`` later
BUILD_TABLES = ("_vocab", "_merges")
M_ARENA_MAX = -8  # glibc's mallopt parameter (malloc.h)


def drop_build_tables(tokenizer: Any) -> int:
    """Drop the Python vocabulary/merges a fast tokenizer was built from (the Rust backend
    keeps its own); returns how many entries were dropped. A tokenizer without a Rust backend
    (or a Whisper one) is left as it is."""
    if getattr(tokenizer, "backend_tokenizer", None) is None or \
            "Whisper" in type(tokenizer).__name__:
        return 0
    dropped = 0
    for name in BUILD_TABLES:
        table = tokenizer.__dict__.get(name)
        if isinstance(table, (dict, list)):
            dropped += len(table)
            delattr(tokenizer, name)
    return dropped


def load_tokenizer(path: str) -> Any:
    """``AutoTokenizer.from_pretrained(path)`` without its build tables, the parse's freed heap
    given back: for the server's own processes (an Engine's ``tokenizer`` is the user's)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    drop_build_tables(tokenizer)
    release_freed_heap()
    return tokenizer


def load_server_tokenizer(path: str) -> Any:
    """The tokenizer a server process loads for itself: a
    :class:`~radixlm.runtime.light_tokenizer.LightTokenizer` (``AutoTokenizer``'s results
    without importing transformers) where the folder allows one, else :func:`load_tokenizer`;
    the parse's freed heap given back either way."""
    from .light_tokenizer import load_light_tokenizer

    light = load_light_tokenizer(path)
    if light is None:
        return load_tokenizer(path)
    release_freed_heap()
    return light


def release_freed_heap() -> bool:
    """Return the C heap's free pages to the system (glibc ``malloc_trim``); False where the
    C library has none (musl, macOS)."""
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):
        return False
    trim(0)
    return True


def limit_malloc_arenas(count: int = 1) -> bool:
    """Serve every thread's ``malloc`` from at most ``count`` glibc arenas (``M_ARENA_MAX``);
    call it before the process starts threads. glibc gives each new thread an arena of its
    own (up to 8 per core), and memory freed in one stays there: in the scheduler, the
    grammar worker's and the sockets' threads kept 12 MiB in two arenas of their own after
    8 requests (SmolLM2's ``engine_rss.py``) that the main heap would have reused. False
    where ``MALLOC_ARENA_MAX`` is set (the user's choice stands) or the C library has no
    ``mallopt`` (musl, macOS)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):
        return False
    return mallopt(M_ARENA_MAX, count) == 1


def rss_mib() -> tuple[float, float] | None:
    """(RSS, peak RSS) of this process in MiB, or None off Linux."""
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            kib = {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f)
                   if k in ("VmRSS", "VmHWM")}
    except OSError:
        return None
    return kib["VmRSS"] / 1024, kib["VmHWM"] / 1024


class LoadSteps:
    """RSS after each load step, for one start-up log line (what the peak is made of)."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, float]] = []

    def mark(self, step: str) -> None:
        if (mib := rss_mib()) is not None:
            self.steps.append((step, mib[0]))

    def describe(self) -> str:
        """``RSS 812 MiB, peak 903 MiB (after tokenizer 402, model 700, ...)``."""
        mib = rss_mib()
        if mib is None:
            return "RSS unknown (no /proc)"
        steps = ", ".join(f"{step} {rss:.0f}" for step, rss in self.steps)
        return f"RSS {mib[0]:.0f} MiB, peak {mib[1]:.0f} MiB (after {steps})"
