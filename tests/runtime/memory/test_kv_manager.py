"""KVManager: prefix reuse, release and truncation, and its ownership invariant under random
admit / extend / commit / truncate / finish / evict sequences (hypothesis stateful testing).

Besides the page ownership the manager audits itself, the machine checks what the bookkeeping
is for: every computed position of a live request is backed by a slot that holds the KV of
exactly that request's prefix (a fake pool records, per slot, the prefix it was computed for).
"""

from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from radixlm.runtime.load_memory import rss_mib
from radixlm.runtime.memory.kv_manager import KVManager, ReqKV
from radixlm.runtime.memory.page_allocator import PageAllocator, pages_of

NUM_PAGES, MAX_ROWS, MAX_CONTEXT = 12, 3, 24


def make_kv(page_size: int = 1, num_pages: int = NUM_PAGES, cache: bool = True) -> KVManager:
    return KVManager(PageAllocator(num_pages, page_size), MAX_ROWS, MAX_CONTEXT,
                     enable_cache=cache)


def prefill(kv: KVManager, tokens: list[int]) -> ReqKV:
    """Admit ``tokens`` and compute all of it (as one extend would)."""
    r = kv.begin(tokens, "", max_reuse=len(tokens) - 1)
    assert kv.reserve(r, len(tokens) - r.kv_len) is not None
    kv.mark_computed(r)
    return r


def conserved(kv: KVManager) -> bool:
    """Free + tree + requests' own pages account for the whole pool."""
    own = sum(len(r.own_pages) for r in kv.live.values())
    tree = len(kv.cache.pages()) if kv.cache is not None else 0
    return kv.allocator.num_free_pages + tree + own == kv.allocator.num_pages


def test_the_slot_table_is_zero_and_takes_memory_only_where_written():
    """256 rows x 8k positions of int64 (16 MiB): resident only in the pages requests wrote,
    and read as zero elsewhere, as ``torch.zeros`` would."""
    if rss_mib() is None:
        pytest.skip("no /proc: RSS unknown")
    before = rss_mib()[0]
    kv = KVManager(PageAllocator(64, 1), 256, 8192)
    assert kv.table.shape == (256, 8192) and not kv.table[-1].any()
    r = kv.begin(list(range(40)), "", max_reuse=0)
    slots = kv.reserve(r, 40)
    assert rss_mib()[0] - before < 8
    assert kv.table[r.row, :40].tolist() == slots.tolist()
    assert kv.table.count_nonzero() == slots.count_nonzero()


@pytest.mark.parametrize("page_size", [1, 4])
def test_a_finished_prompt_is_reused_by_the_next_request_in_whole_pages(page_size):
    kv = make_kv(page_size)
    first = prefill(kv, list(range(1, 11)))
    slots = kv.table[first.row, :10].clone()
    kv.release(first, list(range(1, 11)))
    second = kv.begin(list(range(1, 11)) + [99], "", max_reuse=10)
    hit = 10 - 10 % page_size
    assert second.kv_len == second.tree_len == hit
    assert kv.table[second.row, :hit].tolist() == slots[:hit].tolist()
    assert kv.audit() == [] and conserved(kv)


def test_other_namespaces_and_a_disabled_cache_reuse_nothing():
    kv = make_kv()
    kv.release(prefill(kv, [1, 2, 3, 4]), [1, 2, 3, 4])
    assert kv.begin([1, 2, 3, 4, 5], "tenant", max_reuse=4).kv_len == 0
    off = make_kv(cache=False)
    off.release(prefill(off, [1, 2, 3, 4]), [1, 2, 3, 4])
    assert off.begin([1, 2, 3, 4, 5], "", max_reuse=4).kv_len == 0
    assert off.allocator.num_free_pages == NUM_PAGES, "without a cache release frees it all"


def test_release_without_cache_frees_the_requests_pages():
    kv = make_kv()
    kv.release(prefill(kv, [1, 2, 3]), [1, 2, 3], cache=False)
    assert kv.allocator.num_free_pages == NUM_PAGES and kv.cached_prefix_len([1, 2, 3], "") == 0


def test_truncate_frees_whole_pages_past_the_end_and_never_cuts_into_the_cache():
    kv = make_kv(page_size=2)
    r = prefill(kv, list(range(1, 9)))  # 4 own pages
    kv.commit_prefix(r, list(range(1, 5)))  # the first 2 pages go to the tree
    free = kv.allocator.num_free_pages
    kv.truncate(r, 5)  # keeps positions 0-4: page 3 (positions 6-7) goes back
    assert r.kv_len == r.computed_len == 5 and kv.allocator.num_free_pages == free + 1
    with pytest.raises(ValueError, match=r"outside \[4, 5\]"):
        kv.truncate(r, 3)
    assert kv.audit() == [] and conserved(kv)


def test_reserve_evicts_the_cache_then_reports_exhaustion():
    kv = make_kv(num_pages=6)
    kv.release(prefill(kv, [1, 2, 3, 4]), [1, 2, 3, 4])
    r = kv.begin([7, 8, 9, 10, 11, 12], "", max_reuse=5)
    assert kv.reserve(r, 6) is not None, "unlocked cache pages are evicted for a request"
    assert kv.cache.total_tokens < 4
    assert kv.reserve(r, 1) is None, "out of memory is reported, not raised"
    with pytest.raises(ValueError, match="exceeds the context"):
        kv.reserve(r, MAX_CONTEXT)
    assert kv.audit() == [] and conserved(kv)


def test_flush_is_refused_while_requests_hold_kv():
    kv = make_kv()
    r = prefill(kv, [1, 2, 3])
    assert not kv.flush()
    kv.release(r, [1, 2, 3])
    assert kv.flush() and kv.allocator.num_free_pages == NUM_PAGES


def test_audit_finds_and_repairs_a_leaked_page():
    kv = make_kv()
    leaked = kv.allocator.alloc(1)
    problems = kv.audit(repair=True)
    assert problems == ["1 pages owned by nobody"] and kv.allocator.is_free(leaked[0])
    assert kv.audit() == []


class KVMachine(RuleBasedStateMachine):
    """Requests over a 3-token alphabet (so prefixes are shared) in a 12-page pool."""

    @initialize(page_size=st.sampled_from([1, 2, 4]))
    def setup(self, page_size: int) -> None:
        self.kv = make_kv(page_size)
        self.reqs: list[tuple[ReqKV, list[int]]] = []  # (state, the request's tokens)
        self.pool: dict[int, tuple[int, ...]] = {}  # slot -> prefix whose KV it holds

    def _pick(self, i: int) -> tuple[ReqKV, list[int]]:
        return self.reqs[i % len(self.reqs)]

    @precondition(lambda self: self.kv.free_rows > 0)
    @rule(tokens=st.lists(st.integers(1, 3), min_size=1, max_size=MAX_CONTEXT // 2))
    def admit(self, tokens: list[int]) -> None:
        r = self.kv.begin(tokens, "", max_reuse=len(tokens) - 1)
        assert r.kv_len == r.tree_len <= len(tokens) - 1
        assert r.kv_len % self.kv.page_size == 0, "the cache serves whole pages"
        self.reqs.append((r, list(tokens)))

    @precondition(lambda self: self.reqs)
    @rule(i=st.integers(0, 9), n=st.integers(1, 8))
    def extend(self, i: int, n: int) -> None:
        """Assign slots to up to ``n`` more tokens and compute them (a forward)."""
        r, tokens = self._pick(i)
        n = min(n, len(tokens) - r.kv_len)
        if n <= 0:
            return
        before = r.kv_len
        if self.kv.reserve(r, n) is None:
            assert r.kv_len == before, "a failed reservation changes nothing"
            return
        for p in range(before, r.kv_len):
            self.pool[int(self.kv.table[r.row, p])] = tuple(tokens[: p + 1])
        self.kv.mark_computed(r)

    @precondition(lambda self: self.reqs)
    @rule(i=st.integers(0, 9))
    def commit(self, i: int) -> None:
        r, tokens = self._pick(i)
        self.kv.commit_prefix(r, tokens)
        assert r.tree_len % self.kv.page_size == 0 and r.tree_len <= r.computed_len

    @precondition(lambda self: self.reqs)
    @rule(i=st.integers(0, 9), cut=st.integers(0, 8),
          new=st.lists(st.integers(1, 3), max_size=4))
    def retokenize(self, i: int, cut: int, new: list[int]) -> None:
        """A jump-forward: forget the KV after some point and rewrite the tokens there."""
        r, tokens = self._pick(i)
        length = max(r.kv_len - cut, r.tree_len)
        self.kv.truncate(r, length)
        tokens[length:] = new or tokens[length:]
        del tokens[MAX_CONTEXT:]

    @precondition(lambda self: self.reqs)
    @rule(i=st.integers(0, 9), cache=st.booleans())
    def finish(self, i: int, cache: bool) -> None:
        r, tokens = self.reqs.pop(i % len(self.reqs))
        self.kv.release(r, tokens, cache=cache)

    @rule(pages=st.integers(0, NUM_PAGES))
    def make_room(self, pages: int) -> None:
        ok = self.kv.ensure_free(pages)
        assert ok == (self.kv.allocator.num_free_pages >= pages)

    @invariant()
    def pages_have_one_owner(self) -> None:
        if hasattr(self, "kv"):
            assert self.kv.audit() == [] and conserved(self.kv)

    @invariant()
    def computed_positions_hold_their_own_prefix(self) -> None:
        for r, tokens in getattr(self, "reqs", []):
            slots = self.kv.table[r.row, : r.computed_len].tolist()
            for p, slot in enumerate(slots):
                assert self.pool.get(slot) == tuple(tokens[: p + 1]), (p, slot)
            # every assigned slot lies on a page the request or the tree owns
            owned = set(r.own_pages) | set(self.kv.cache.pages())
            assert set(pages_of(self.kv.table[r.row, : r.kv_len].tolist(),
                                self.kv.page_size)) <= owned


KVMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40,
                                       deadline=None)
test_kv_ownership_invariant_under_random_workloads = KVMachine.TestCase
