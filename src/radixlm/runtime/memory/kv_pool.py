"""The paged KV memory: per layer, K and V tensors of ``[num_pages, page_size, kv_heads, dim]``.

Slot ``s`` of the pool is token ``s % page_size`` of page ``s // page_size``. Which slots belong
to whom is the allocator's business (:mod:`page_allocator`); this class only holds the memory.
"""

from __future__ import annotations

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
        self.k_buffers = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]
        self.v_buffers = [torch.zeros(shape, dtype=dtype, device=device) for _ in range(num_layers)]

    @property
    def num_slots(self) -> int:
        return self.num_pages * self.page_size

    def nbytes(self) -> int:
        """Memory held by all layers' K and V."""
        per = self.k_buffers[0].numel() * self.k_buffers[0].element_size()
        return 2 * per * len(self.k_buffers)
