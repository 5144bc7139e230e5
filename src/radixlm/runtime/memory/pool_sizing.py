"""How many tokens the KV pool holds: on the CPU by need, on CUDA from the device's memory.

The pool is sized for ``context_length x sequences`` tokens (whole pages), capped by memory:
the weights plus the pool may take ``mem_fraction`` of the device's memory (free RAM on CPU,
total GPU memory on CUDA); when that leaves less, memory decides. What differs per device is
``sequences`` (:func:`pool_sequences`):

- ``--max-running-requests`` when given (the user's concurrency), on any device;
- else on the CPU, unless ``--mem-fraction-static`` is given, :data:`DEFAULT_CPU_SEQUENCES`
  full-context sequences: a CPU's RAM is shared with everything else and a few cores decode
  only a handful of sequences at a useful speed, so the pool holds what that concurrency can
  use instead of a quarter of free RAM (SmolLM2-135M: 8 x 8,192 tokens instead of ~112k);
- else (CUDA, or an explicit ``--mem-fraction-static``) the scheduler's default cap on running
  requests, so memory normally decides, as in SGLang.

The scheduler may still run more, shorter requests than ``sequences`` at once: they share the
pool token by token, a prompt that cannot fit the pool is refused at admission
(``scheduling/admission_check.py``) and decode that runs short retracts the newest request.
``--max-total-tokens`` is an explicit override. :class:`PoolSize.limited_by` says which bound
decided: ``"context x requests"``, ``"memory"`` (the default fraction),
``"mem_fraction_static"`` (an explicit one) or ``"max_total_tokens"``; :meth:`PoolSize.describe`
is the start-up log's wording with the numbers. :func:`size_kv_pool` and
:func:`pool_sequences` are pure; :func:`device_memory_bytes` probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MEM_FRACTION = {"cpu": 0.25, "cuda": 0.85}  # CPU RAM is shared with everything else
# Full-context sequences a CPU pool is sized for by default (module docstring): a small batch
# keeps per-sequence decode speed on a few cores; shorter requests share the pool beyond it.
DEFAULT_CPU_SEQUENCES = 8
MIB = 2**20


@dataclass(frozen=True)
class PoolSize:
    """The chosen pool: whole pages; ``limited_by`` says which bound decided it and
    ``detail`` the numbers behind it (for the start-up log)."""

    tokens: int
    bytes: int
    bytes_per_token: int
    limited_by: str  # "context x requests", "memory", "mem_fraction_static", "max_total_tokens"
    detail: str = ""

    def describe(self) -> str:
        """E.g. ``8 x 8,192 tokens = 65,536 tokens, 2,880 MiB (context x requests)``."""
        why = f"{self.limited_by}: {self.detail}" if self.detail else self.limited_by
        size = f"{self.tokens:,} tokens, {self.bytes / MIB:,.0f} MiB"
        if self.limited_by == "context x requests" and self.detail:
            return f"{self.detail} = {size} ({self.limited_by})"
        return f"{size} ({why})"


def pool_sequences(device_kind: str, max_running_requests: int | None,
                   mem_fraction_given: bool, default_running: int) -> int:
    """How many full-context sequences the pool is sized for (the module docstring's rule);
    ``default_running`` is the scheduler's cap when ``--max-running-requests`` is not given."""
    if max_running_requests is not None:
        return max_running_requests
    if device_kind == "cpu" and not mem_fraction_given:
        return DEFAULT_CPU_SEQUENCES
    return default_running


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int,
                       dtype_bytes: int) -> int:
    """K and V for one token in every layer."""
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes


def size_kv_pool(*, available_bytes: int, weights_bytes: int, bytes_per_token: int,
                 mem_fraction: float, context_length: int, max_running_requests: int,
                 page_size: int, max_total_tokens: int | None = None,
                 mem_fraction_given: bool = False) -> PoolSize:
    """The pool size in tokens (a multiple of ``page_size``): ``context_length x
    max_running_requests`` capped by what ``mem_fraction`` of ``available_bytes`` leaves after
    the weights; raises when not one page fits. ``mem_fraction_given`` names the memory bound
    ``"mem_fraction_static"`` (the user's) rather than ``"memory"`` (the default fraction)."""
    if not 0 < mem_fraction <= 1:
        raise ValueError(f"mem_fraction_static must be in (0, 1], got {mem_fraction}")
    if max_total_tokens is not None:
        tokens = -(-max_total_tokens // page_size) * page_size
        return PoolSize(tokens, tokens * bytes_per_token, bytes_per_token, "max_total_tokens")
    budget = int(available_bytes * mem_fraction) - weights_bytes
    by_memory = max(budget, 0) // bytes_per_token // page_size * page_size
    cap = -(-context_length * max_running_requests // page_size) * page_size
    if by_memory < page_size:
        raise ValueError(
            f"no room for the KV pool: {mem_fraction:.0%} of {available_bytes / 2**30:.2f} GiB "
            f"available leaves {budget / MIB:.0f} MiB after {weights_bytes / MIB:.0f} MiB "
            f"of weights; raise --mem-fraction-static or set --max-total-tokens")
    need = f"{max_running_requests:,} x {context_length:,} tokens"
    if cap <= by_memory:
        return PoolSize(cap, cap * bytes_per_token, bytes_per_token, "context x requests", need)
    detail = (f"{mem_fraction:.0%} of {available_bytes / 2**30:.2f} GiB available less "
              f"{weights_bytes / MIB:,.0f} MiB of weights; {need} would take "
              f"{cap * bytes_per_token / MIB:,.0f} MiB")
    limit = "mem_fraction_static" if mem_fraction_given else "memory"
    return PoolSize(by_memory, by_memory * bytes_per_token, bytes_per_token, limit, detail)


def device_memory_bytes(device: str) -> int:
    """Total memory of a CUDA device, or the RAM currently available on the host (CPU)."""
    if device.startswith("cuda"):
        import torch

        index = torch.device(device).index or 0
        return int(torch.cuda.get_device_properties(index).total_memory)
    meminfo = Path("/proc/meminfo")
    if meminfo.is_file():
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    import os

    return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
