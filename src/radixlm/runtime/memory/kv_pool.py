"""The paged KV memory: per layer, K and V tensors of ``[num_pages, page_size, kv_heads, dim]``.

Slot ``s`` of the pool is token ``s % page_size`` of page ``s // page_size``. Which slots belong
to whom is the allocator's business (:mod:`page_allocator`); this class only holds the memory.

The pool may hold a narrower type than the model computes in (``--kv-cache-dtype bfloat16``
beside float32 weights: half the memory). New K/V rows are rounded into it when stored, and
:func:`widened_kv` gives attention the rows one call reads in the model's type (exact: every
bfloat16 is a float32), as a small cache of their own, so every attention kernel runs as on a
float32 pool whose values happen to be bfloat16.

On the CPU the buffers are views of one anonymous memory map rather than ``torch.zeros``: its
pages read as zero, as ``torch.zeros`` would give, but take memory (RSS) only once a token's
K/V is written there, and the allocator hands out the lowest free pages first, so the
process holds what the tokens stored so far need rather than the whole pool from the start.
"""

from __future__ import annotations

import math
import mmap

import torch


class KVPool:
    """K/V buffers for every layer."""

    def __init__(
        self,
        num_layers: int,
        num_pages: int,
        page_size: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        if num_pages < 1 or page_size < 1:
            raise ValueError(
                f"KV pool needs num_pages >= 1 and page_size >= 1, got {num_pages}, {page_size}"
            )
        shape = (num_pages, page_size, num_kv_heads, head_dim)
        self.num_pages = num_pages
        self.page_size = page_size
        buffers = zeroed_buffers(shape, 2 * num_layers, dtype, torch.device(device))
        self.k_buffers = buffers[:num_layers]
        self.v_buffers = buffers[num_layers:]

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    def nbytes(self) -> int:
        """Memory held by all layers' K and V."""
        per = self.k_buffers[0].numel() * self.k_buffers[0].element_size()
        return 2 * per * len(self.k_buffers)


def zeroed_buffers(shape: tuple[int, ...], count: int, dtype: torch.dtype,
                   device: torch.device) -> list[torch.Tensor]:
    """``count`` zero tensors of ``shape``; on the CPU views of one anonymous memory map, each
    starting on a page boundary, resident only where written (the module docstring)."""
    if device.type != "cpu":
        return [torch.zeros(shape, dtype=dtype, device=device) for _ in range(count)]
    numel = math.prod(shape)
    itemsize = torch.empty((), dtype=dtype).element_size()
    stride = -(-numel * itemsize // mmap.PAGESIZE) * mmap.PAGESIZE  # bytes, whole pages
    memory = mmap.mmap(-1, max(stride * count, mmap.PAGESIZE))  # zero pages until written
    # each view keeps ``memory`` alive (the buffer protocol's export)
    return [torch.frombuffer(memory, dtype=dtype, count=numel, offset=i * stride).view(shape)
            for i in range(count)]


def widened_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indices: torch.Tensor,
               dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The rows ``kv_indices`` of a layer's K and V (``[pages, page_size, H, D]``) as ``dtype``
    caches ``[N, 1, H, D]`` (page size 1) and their indices ``0 .. N - 1``, in the same
    order: an attention call over them reads what it would read from the pool."""
    h, d = k_cache.shape[2], k_cache.shape[3]
    idx = kv_indices.long()
    k = k_cache.view(-1, h, d).index_select(0, idx).to(dtype).unsqueeze(1)
    v = v_cache.view(-1, h, d).index_select(0, idx).to(dtype).unsqueeze(1)
    return k, v, torch.arange(idx.shape[0], dtype=kv_indices.dtype, device=idx.device)
