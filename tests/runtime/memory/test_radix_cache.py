"""Radix cache: matching, splitting, namespaces, LRU eviction, and its invariants under
random operation sequences (hypothesis stateful testing)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from radixlm.runtime.memory.page_allocator import PageAllocator, pages_of
from radixlm.runtime.memory.radix_cache import RadixCache


def slots_for(alloc: PageAllocator, n: int) -> torch.Tensor:
    new, _ = alloc.extend_slots([], n, True)
    return torch.tensor(new, dtype=torch.int64)


@pytest.mark.parametrize("page_size", [1, 4])
def test_match_splits_edges_and_returns_slots(page_size):
    alloc = PageAllocator(64, page_size)
    cache = RadixCache(alloc, page_size)
    key = list(range(100, 116))
    value = slots_for(alloc, 16)
    assert cache.insert(key, value) == 0
    m = cache.match_prefix(key[:8] + [999] * 8)
    assert m.length == 8 and m.slots.tolist() == value[:8].tolist()
    # the edge was split at 8: a sibling branch shares the first half only
    other = key[:8] + list(range(200, 208))
    other_val = torch.cat([value[:8], slots_for(alloc, 8)])
    assert cache.insert(other, other_val) == 8
    assert cache.match_prefix(other).slots.tolist() == other_val.tolist()
    assert cache.match_prefix(key).slots.tolist() == value.tolist()


def test_page_aware_matching_rounds_down_to_whole_pages():
    alloc = PageAllocator(16, 4)
    cache = RadixCache(alloc, 4)
    key = list(range(12))
    cache.insert(key, slots_for(alloc, 12))
    assert cache.match_prefix(key[:6]).length == 4
    assert cache.match_prefix(key[:5] + [77, 78, 79]).length == 4
    with pytest.raises(ValueError, match="whole pages"):
        cache.insert(list(range(6)), slots_for(alloc, 6))


def test_namespaces_are_kept_apart():
    alloc = PageAllocator(32, 1)
    cache = RadixCache(alloc, 1)
    cache.insert([1, 2, 3], slots_for(alloc, 3), namespace="tenant-a")
    assert cache.match_prefix([1, 2, 3], namespace="tenant-b").length == 0
    assert cache.match_prefix([1, 2, 3], namespace="tenant-a").length == 3


def test_eviction_is_lru_and_spares_locked_paths():
    alloc = PageAllocator(12, 1)
    cache = RadixCache(alloc, 1)
    old, new, pinned = [1, 1, 1], [2, 2, 2], [3, 3, 3]
    for k in (old, new, pinned):
        cache.insert(k, slots_for(alloc, 3))
    cache.match_prefix(new)  # touch: now more recent than `old`
    lock = cache.match_prefix(pinned).last_node
    cache.lock(lock)
    cache.match_prefix(pinned)
    assert cache.evict(3) == 3
    assert cache.match_prefix(old).length == 0 and cache.match_prefix(new).length == 3
    assert cache.evict(100) == 3  # only `new` is left to evict
    assert cache.match_prefix(pinned).length == 3
    with pytest.raises(RuntimeError, match="locked"):
        cache.reset()
    cache.unlock(lock)
    cache.reset()
    assert alloc.num_free_pages == alloc.num_pages


class CacheMachine(RuleBasedStateMachine):
    """Random inserts, matches, locks, unlocks and evictions against a tiny pool."""

    locks = Bundle("locks")

    def __init__(self) -> None:
        super().__init__()
        self.page_size = 2
        self.alloc = PageAllocator(24, self.page_size)
        self.cache = RadixCache(self.alloc, self.page_size)
        self.held: list[dict] = []  # lock handles not yet released

    @rule(key=st.lists(st.integers(0, 3), min_size=2, max_size=12),
          ns=st.sampled_from(["", "x"]))
    def insert(self, key, ns):
        key = key[: len(key) - len(key) % self.page_size]
        pages_needed = len(key) // self.page_size
        if pages_needed > self.alloc.num_free_pages:
            self.cache.evict(pages_needed - self.alloc.num_free_pages)
        if pages_needed > self.alloc.num_free_pages:
            return
        value = slots_for(self.alloc, len(key))
        already = self.cache.insert(key, value, ns)
        # the caller frees its duplicate copy of what was already cached
        self.alloc.free(pages_of(value[:already].tolist(), self.page_size))

    @rule(target=locks, key=st.lists(st.integers(0, 3), min_size=2, max_size=12),
          ns=st.sampled_from(["", "x"]))
    def lock(self, key, ns):
        m = self.cache.match_prefix(key, ns)
        self.cache.lock(m.last_node)
        handle = {"node": m.last_node, "released": False}
        self.held.append(handle)
        return handle

    @rule(handle=locks)
    def unlock(self, handle):
        if not handle["released"]:
            self.cache.unlock(handle["node"])
            handle["released"] = True

    @rule(pages=st.integers(1, 12))
    def evict(self, pages):
        locked_before = self._locked_matches()
        self.cache.evict(pages)
        assert self._locked_matches() == locked_before, "a locked path was evicted"

    def _locked_matches(self) -> list[int]:
        out = []
        for node in self.cache._nodes():
            if node.lock_ref > 0:
                out.append(node.id)
        return sorted(out)

    @invariant()
    def no_slot_both_free_and_referenced(self):
        pages = self.cache.pages()
        assert len(pages) == len(set(pages)), "a page is referenced by two nodes"
        assert not [p for p in pages if self.alloc.is_free(p)]
        assert len(pages) + self.alloc.num_free_pages == self.alloc.num_pages

    @invariant()
    def token_counts_add_up(self):
        total = sum(len(n.key) for n in self.cache._nodes())
        assert total == self.cache.evictable_tokens + self.cache.protected_tokens

    def teardown(self):
        for handle in self.held:
            if not handle["released"]:
                self.cache.unlock(handle["node"])
        self.cache.reset()
        assert self.alloc.num_free_pages == self.alloc.num_pages


TestCacheMachine = CacheMachine.TestCase
TestCacheMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
