"""How many tokens the KV pool holds: sized from the device's memory, as SGLang does.

``--mem-fraction-static`` is the share of the device's memory that weights plus KV pool may
take (free RAM on CPU, total GPU memory on CUDA); the pool gets what the weights leave, capped
by what ``context_length x max_running_requests`` could ever use. ``--max-total-tokens`` is an
explicit override. :func:`size_kv_pool` is pure; :func:`device_memory_bytes` probes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

DEFAULT_MEM_FRACTION = {"cpu": 0.25, "cuda": 0.85}  # CPU RAM is shared with everything else


@dataclass(frozen=True)
class PoolSize:
    """The chosen pool: whole pages; ``limited_by`` says which bound decided it."""

    tokens: int
    bytes: int
    bytes_per_token: int
    limited_by: str  # "max_total_tokens" (explicit), "memory" or "context x requests"


def kv_bytes_per_token(num_layers: int, num_kv_heads: int, head_dim: int,
                       dtype_bytes: int) -> int:
    """K and V for one token in every layer."""
    return 2 * num_layers * num_kv_heads * head_dim * dtype_bytes


def size_kv_pool(*, available_bytes: int, weights_bytes: int, bytes_per_token: int,
                 mem_fraction: float, context_length: int, max_running_requests: int,
                 page_size: int, max_total_tokens: int | None = None) -> PoolSize:
    """The pool size in tokens (a multiple of ``page_size``); raises when not one page fits."""
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
            f"available leaves {budget / 2**20:.0f} MiB after {weights_bytes / 2**20:.0f} MiB "
            f"of weights; raise --mem-fraction-static or set --max-total-tokens")
    tokens, limit = (by_memory, "memory") if by_memory < cap else (cap, "context x requests")
    return PoolSize(tokens, tokens * bytes_per_token, bytes_per_token, limit)


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
