"""Who owns which KV page: running requests, the radix cache, or the free list.

Each running request has a row in the request-to-token table (its slots in sequence order) and
knows how many leading tokens (``tree_len``, whole pages) belong to the radix cache, pinned by
a lock on ``last_node``; the pages after that are its own. Inserting a request's computed
prefix into the cache hands those pages to the tree (duplicates of what the tree already holds
are freed and the row is pointed at the tree's copy). Ownership invariant, checked by
:meth:`audit`: free pages + tree pages + requests' own pages = the pool, with no overlap.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import torch

from .kv_pool import zeroed_buffers
from .page_allocator import KVPoolExhaustedError, PageAllocator, pages_of
from .radix_cache import RadixCache, TreeNode

logger = logging.getLogger(__name__)


@dataclass
class ReqKV:
    """One request's KV bookkeeping."""

    row: int
    namespace: str
    kv_len: int = 0  # tokens whose slots are assigned (computed, or being computed this step)
    computed_len: int = 0  # tokens whose KV has been written (only these may be cached)
    tree_len: int = 0  # leading tokens owned by the radix cache (pinned by last_node)
    last_node: TreeNode | None = None
    own_pages: list[int] = field(default_factory=list)


class KVManager:
    """Allocation, prefix reuse and release of KV for requests."""

    def __init__(
        self,
        allocator: PageAllocator,
        max_rows: int,
        max_context: int,
        enable_cache: bool = True,
    ) -> None:
        self.allocator = allocator
        self.page_size = allocator.page_size
        self.cache = RadixCache(allocator, self.page_size) if enable_cache else None
        # [max_rows, max_context] request -> pool slot of each token position; zero pages
        # until written (kv_pool.zeroed_buffers: 256 rows x 8k positions are 16 MiB, of which
        # the running requests' rows touch a few pages), rows taken lowest first
        self.table = zeroed_buffers((max_rows, max_context), 1, torch.int64,
                                    torch.device("cpu"))[0]
        self._free_rows = list(range(max_rows - 1, -1, -1))
        self.live: dict[int, ReqKV] = {}  # row -> state

    # -- admission ------------------------------------------------------------------------

    @property
    def free_rows(self) -> int:
        return len(self._free_rows)

    def cached_prefix_len(self, tokens: list[int], namespace: str) -> int:
        """How much of ``tokens`` the cache could serve (for scheduling; takes no lock)."""
        if self.cache is None:
            return 0
        return self.cache.match_prefix(tokens, namespace).length

    def begin(self, tokens: list[int], namespace: str, max_reuse: int) -> ReqKV:
        """Take a table row and pin the cached prefix of ``tokens[:max_reuse]``."""
        if not self._free_rows:
            raise RuntimeError("no free request rows")
        kv = ReqKV(row=self._free_rows.pop(), namespace=namespace)
        self.live[kv.row] = kv
        if self.cache is not None and max_reuse > 0:
            match = self.cache.match_prefix(tokens[:max_reuse], namespace)
            self.cache.lock(match.last_node)
            kv.last_node, kv.tree_len = match.last_node, match.length
            kv.kv_len = kv.computed_len = match.length
            self.table[kv.row, : match.length] = match.slots
        return kv

    def pages_needed(self, kv: ReqKV, extra: int) -> int:
        return self.allocator.pages_needed(kv.kv_len, extra, last_page_owned=True)

    def ensure_free(self, pages: int) -> bool:
        """Evict cached pages until ``pages`` are free; False if that is impossible."""
        short = pages - self.allocator.num_free_pages
        if short > 0 and self.cache is not None:
            self.cache.evict(short)
        return self.allocator.num_free_pages >= pages

    def reserve(self, kv: ReqKV, extra: int) -> torch.Tensor | None:
        """Slots for ``extra`` more tokens (evicting cache if needed); None if out of memory."""
        if kv.kv_len + extra > self.table.shape[1]:
            raise ValueError(f"sequence of {kv.kv_len + extra} tokens exceeds the context "
                             f"({self.table.shape[1]})")
        if not self.ensure_free(self.pages_needed(kv, extra)):
            return None
        current = self.table[kv.row, : kv.kv_len]
        try:
            new, pages = self.allocator.extend_slots(current, extra, last_page_owned=True)
        except KVPoolExhaustedError:
            return None
        kv.own_pages.extend(pages)
        slots = torch.tensor(new, dtype=torch.int64)
        self.table[kv.row, kv.kv_len : kv.kv_len + extra] = slots
        kv.kv_len += extra
        return slots

    # -- caching and release --------------------------------------------------------------

    def truncate(self, kv: ReqKV, length: int) -> None:
        """Forget KV after the first ``length`` tokens (jump-forward retokenized them);
        pages wholly past the new end go back to the pool. Never cuts into cached pages."""
        if not kv.tree_len <= length <= kv.kv_len:
            raise ValueError(f"truncate to {length} outside [{kv.tree_len}, {kv.kv_len}]")
        # Owned pages hold only positions from the cached prefix's (page-aligned) end on:
        # the pages before it are the cache's, so only [start, length) can keep an owned one
        # (O(own tokens), not O(context): a verification truncates every step).
        start = kv.tree_len - kv.tree_len % self.page_size
        keep = set(pages_of(self.table[kv.row, start:length].tolist(), self.page_size))
        drop = [p for p in kv.own_pages if p not in keep]
        self.allocator.free(drop)
        kv.own_pages = [p for p in kv.own_pages if p in keep]
        kv.kv_len = length
        kv.computed_len = min(kv.computed_len, length)

    def mark_computed(self, kv: ReqKV) -> None:
        """The forward that filled every assigned slot has run."""
        kv.computed_len = kv.kv_len

    def commit_prefix(self, kv: ReqKV, tokens: list[int]) -> None:
        """Hand the whole pages of computed KV (``tokens`` = the sequence so far) to the cache
        and re-pin at the new end, so other requests can reuse them while this one runs."""
        if self.cache is None:
            return
        n = min(kv.computed_len, len(tokens))
        n -= n % self.page_size
        if n <= kv.tree_len:
            return
        slots = self.table[kv.row, :n].clone()
        already = self.cache.insert(tokens[:n], slots, kv.namespace)
        if already > kv.tree_len:  # another request cached part of it first: drop our copy
            dup = set(pages_of(slots[kv.tree_len : already].tolist(), self.page_size))
            self.allocator.free(sorted(dup))
            kv.own_pages = [p for p in kv.own_pages if p not in dup]
        match = self.cache.match_prefix(tokens[:n], kv.namespace)
        assert match.length == n, "inserted prefix must match in full"
        self.table[kv.row, :n] = match.slots
        handed = set(pages_of(match.slots[kv.tree_len :].tolist(), self.page_size))
        kv.own_pages = [p for p in kv.own_pages if p not in handed]
        self.cache.lock(match.last_node)
        if kv.last_node is not None:
            self.cache.unlock(kv.last_node)
        kv.last_node, kv.tree_len = match.last_node, n

    def release(self, kv: ReqKV, tokens: list[int], cache: bool = True) -> None:
        """Finish with a request: cache its computed KV (if asked), free the rest and its row."""
        if cache:
            self.commit_prefix(kv, tokens)
        if kv.last_node is not None and self.cache is not None:
            self.cache.unlock(kv.last_node)
        self.allocator.free(kv.own_pages)
        kv.own_pages, kv.last_node = [], None
        del self.live[kv.row]
        self._free_rows.append(kv.row)

    def flush(self) -> bool:
        """Drop the cache; refused (False) while requests are running."""
        if self.live:
            return False
        if self.cache is not None:
            self.cache.reset()
        return True

    # -- accounting -----------------------------------------------------------------------

    def audit(self, repair: bool = False) -> list[str]:
        """Check the ownership invariant; with ``repair``, return unowned pages to the pool.

        Returns a list of problems (empty when consistent). Never raises: a serving engine
        logs and repairs rather than dying on a bookkeeping error.
        """
        owners: dict[int, str] = {}
        problems: list[str] = []
        tree_pages = self.cache.pages() if self.cache is not None else []
        claims = [(p, "tree") for p in tree_pages] + [
            (p, f"row {kv.row}") for kv in self.live.values() for p in kv.own_pages
        ]
        for page, who in claims:
            if page in owners:
                problems.append(f"page {page} owned by {owners[page]} and {who}")
            elif self.allocator.is_free(page):
                problems.append(f"page {page} owned by {who} but free")
            owners[page] = who
        leaked = [p for p in range(self.allocator.num_pages)
                  if p not in owners and not self.allocator.is_free(p)]
        if leaked:
            problems.append(f"{len(leaked)} pages owned by nobody")
            if repair:
                self.allocator.free(leaked)
        for text in problems:
            logger.warning("KV audit: %s%s", text, " (repaired)" if repair and leaked else "")
        return problems

    def stats(self) -> dict[str, float]:
        ps = self.page_size
        total = self.allocator.num_pages
        free = self.allocator.num_free_pages
        live_tokens = sum(kv.kv_len - kv.tree_len for kv in self.live.values())
        tree_tokens = self.cache.total_tokens if self.cache is not None else 0
        used_slots = (total - free) * ps
        return {
            "total_pages": total,
            "free_pages": free,
            "tree_tokens": tree_tokens,
            "evictable_tokens": self.cache.evictable_tokens if self.cache else 0,
            "running_tokens": live_tokens,
            "kv_usage": (total - free) / total,
            # share of allocated slots that hold no live token (partly filled pages)
            "kv_waste": 1 - (live_tokens + tree_tokens) / used_slots if used_slots else 0.0,
        }
