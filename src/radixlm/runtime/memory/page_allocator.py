"""Page allocator for the KV pool, and the slot arithmetic of sequences built on pages.

Invariant: every page is either free (in ``_free``) or owned by exactly one holder (a running
request, or the radix cache); ``free()`` of a page that is already free is an error.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Sequence

import torch


class KVPoolExhaustedError(RuntimeError):
    """Not enough free pages for an allocation."""

    def __init__(self, requested: int, available: int, page_size: int) -> None:
        super().__init__(
            f"KV pool exhausted: requested {requested} pages ({requested * page_size} tokens), "
            f"only {available} free"
        )
        self.requested = requested
        self.available = available


class PageAllocator:
    """Hands out page ids ``0 .. num_pages - 1``, always the lowest free ids first.

    The free ids are a min-heap, so what was freed in any order is handed out again in id
    order: after the cache is flushed, a long prompt gets consecutive slots, and the
    shared-prefix attention reads such a prefix as a view of the pool instead of gathering it
    (a free list that is a stack would return the last freed pages first, scattered).
    """

    def __init__(self, num_pages: int, page_size: int) -> None:
        if num_pages < 1 or page_size < 1:
            raise ValueError(f"need num_pages >= 1 and page_size >= 1, got {num_pages}, "
                             f"{page_size}")
        self.num_pages = num_pages
        self.page_size = page_size
        self._free: list[int] = list(range(num_pages))  # a min-heap (sorted is one)
        self._is_free = bytearray(b"\x01") * num_pages

    @property
    def num_free_pages(self) -> int:
        return len(self._free)

    def alloc(self, n: int) -> list[int]:
        """Take ``n`` pages; raises :class:`KVPoolExhaustedError` and takes none if short."""
        if n < 0:
            raise ValueError(f"cannot allocate a negative number of pages ({n})")
        if n > len(self._free):
            raise KVPoolExhaustedError(n, len(self._free), self.page_size)
        pages = [heapq.heappop(self._free) for _ in range(n)]
        for p in pages:
            self._is_free[p] = 0
        return pages

    def free(self, pages: Iterable[int]) -> None:
        """Return pages to the pool; a double free raises before anything changes."""
        pages = list(pages)
        bad = [p for p in pages if not 0 <= p < self.num_pages or self._is_free[p]]
        if bad or len(set(pages)) != len(pages):
            raise ValueError(f"double free or invalid page ids: {bad or pages}")
        for p in pages:
            self._is_free[p] = 1
        if len(pages) > len(self._free):  # a flush: rebuilding beats one push per page
            self._free.extend(pages)
            heapq.heapify(self._free)
        else:
            for p in pages:
                heapq.heappush(self._free, p)

    def is_free(self, page: int) -> bool:
        return bool(self._is_free[page])

    def pages_needed(self, current_len: int, extra: int, last_page_owned: bool) -> int:
        """Pages to allocate to grow a sequence of ``current_len`` tokens by ``extra``."""
        room = 0
        if last_page_owned and current_len % self.page_size:
            room = self.page_size - current_len % self.page_size
        return -(-max(extra - room, 0) // self.page_size)

    def extend_slots(
        self, slots: Sequence[int] | torch.Tensor, extra: int, last_page_owned: bool
    ) -> tuple[list[int], list[int]]:
        """Slots for ``extra`` more tokens after ``slots``; returns ``(new_slots, new_pages)``.

        If the sequence's last page is partly filled and owned by the caller, it is filled
        first; the rest goes to fresh pages (a borrowed partial page is never written).
        """
        ps = self.page_size
        n = len(slots)
        pages = self.alloc(self.pages_needed(n, extra, last_page_owned))
        new: list[int] = []
        if last_page_owned and n % ps:
            last = int(slots[-1])
            take = min(ps - n % ps, extra)
            new.extend(range(last + 1, last + 1 + take))
        for p in pages:
            take = min(ps, extra - len(new))
            new.extend(range(p * ps, p * ps + take))
        return new, pages


def pages_of(slots: Iterable[int], page_size: int) -> list[int]:
    """Distinct pages touched by ``slots``, in first-seen order."""
    seen: dict[int, None] = {}
    for s in slots:
        seen.setdefault(int(s) // page_size, None)
    return list(seen)
