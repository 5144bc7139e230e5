"""Admission order (fcfs / lpm with aging) and the in-batch prefix dedupe, on their own."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.runtime.memory.kv_manager import KVManager
from radixlm.runtime.memory.page_allocator import PageAllocator
from radixlm.runtime.scheduling.request import Req
from radixlm.runtime.scheduling.schedule_policy import (
    DEDUP_MIN_TOKENS,
    LPM_MAX_QUEUE,
    order_waiting,
    shares_uncached_prefix,
)
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.sampling_params import SamplingParams

MAX_WAIT = 3


def make_req(rid: str, tokens: list[int], wait_steps: int = 0, namespace: str = "") -> Req:
    return Req(rid=rid, token_ids=list(tokens), prompt_len=len(tokens),
               sampling=SamplingParams(), wait_steps=wait_steps, namespace=namespace)


def kv_with(cached: list[list[int]], cache: bool = True) -> KVManager:
    """A KV manager whose radix cache holds each of ``cached`` (page size 1)."""
    kv = KVManager(PageAllocator(4096, 1), 8, 1024, enable_cache=cache)
    for tokens in cached:
        r = kv.begin(tokens, "", max_reuse=0)
        kv.reserve(r, len(tokens) - r.kv_len)
        kv.mark_computed(r)
        kv.release(r, tokens)
    return kv


def args(policy: str = "lpm") -> ServerArgs:
    return ServerArgs(model_path="unused", schedule_policy=policy,
                      lpm_max_wait_steps=MAX_WAIT)


DOC = list(range(100, 140))


def test_lpm_puts_the_longest_cached_prefix_first():
    kv = kv_with([DOC])
    cold, half, full = (make_req("cold", [1, 2, 3]), make_req("half", DOC[:20] + [7]),
                        make_req("full", DOC + [8]))
    assert [r.rid for r in order_waiting([cold, half, full], kv, args())] == [
        "full", "half", "cold"]


def test_lpm_ages_a_passed_over_request_to_the_front():
    kv = kv_with([DOC])
    old = make_req("old", [1, 2, 3], wait_steps=MAX_WAIT)
    hit = make_req("hit", DOC + [8])
    assert [r.rid for r in order_waiting([hit, old], kv, args())] == ["old", "hit"]


@pytest.mark.parametrize("case", ["fcfs", "no cache", "long queue"])
def test_arrival_order_where_lpm_does_not_apply(case):
    kv = kv_with([DOC], cache=case != "no cache")
    n = LPM_MAX_QUEUE + 1 if case == "long queue" else 3
    waiting = [make_req(f"r{i}", [1, 2] if i == 0 else DOC + [i]) for i in range(n)]
    policy = "fcfs" if case == "fcfs" else "lpm"
    assert order_waiting(waiting, kv, args(policy)) == waiting


@settings(max_examples=60, deadline=None)
@given(reqs=st.lists(st.tuples(st.integers(0, 40), st.integers(1, 5), st.integers(0, 6)),
                     min_size=1, max_size=12))
def test_lpm_is_a_permutation_aged_first_then_by_cache_hit(reqs):
    """(shared DOC prefix length, own suffix length, steps waited) per request."""
    kv = kv_with([DOC])
    waiting = [make_req(f"r{i}", DOC[:k] + [1000 + i] * tail, wait_steps=w)
               for i, (k, tail, w) in enumerate(reqs)]
    order = order_waiting(waiting, kv, args())
    assert sorted(r.rid for r in order) == sorted(r.rid for r in waiting)
    aged = [r for r in waiting if r.wait_steps >= MAX_WAIT]
    assert order[: len(aged)] == aged, "aged requests first, in arrival order"
    hits = [kv.cached_prefix_len(r.token_ids[: r.max_reuse], "") for r in order[len(aged):]]
    assert hits == sorted(hits, reverse=True)
    rest = order[len(aged):]
    for a, b in zip(rest, rest[1:]):  # ties keep arrival order (a stable sort)
        if kv.cached_prefix_len(a.token_ids[: a.max_reuse], "") == \
                kv.cached_prefix_len(b.token_ids[: b.max_reuse], ""):
            assert waiting.index(a) < waiting.index(b)


# -- in-batch prefix dedupe -----------------------------------------------------------------

SHARED = list(range(500, 500 + DEDUP_MIN_TOKENS))


@pytest.mark.parametrize("other, cached, waits", [
    (SHARED + [1], [], True),  # 32 uncached shared tokens: wait a step and hit the cache
    (SHARED[:-1] + [1], [], False),  # 31: not worth a step
    (SHARED + [1], [SHARED[:8]], False),  # partly cached already: only 24 would be saved
    (list(range(900, 950)), [], False),  # nothing shared
], ids=["32 shared", "31 shared", "partly cached", "unrelated"])
def test_a_request_waits_only_for_a_long_enough_uncached_shared_prefix(other, cached, waits):
    kv = kv_with(cached)
    req = make_req("r", SHARED + [2, 3])
    assert shares_uncached_prefix(req, [make_req("o", other)], kv) is waits


@pytest.mark.parametrize("shared, duplicated, waits", [
    (16, 0, False),  # the first request recomputing a 16-token tail goes
    (16, 16, True),  # a second would bring the step to 32 duplicated tokens: it waits
    (31, 0, False),
    (0, 40, False),  # sharing nothing uncached never waits
], ids=["first", "second", "31 alone", "nothing shared"])
def test_a_step_duplicates_fewer_than_32_shared_tokens_in_all(shared, duplicated, waits):
    tokens = SHARED[:shared] + [2, 3] if shared else [7, 8]
    req = make_req("r", tokens)
    assert shares_uncached_prefix(req, [make_req("o", SHARED + [1])], kv_with([]),
                                  duplicated) is waits


@pytest.mark.parametrize("case", ["namespace", "no cache", "nothing scheduled"])
def test_no_dedupe_across_namespaces_without_a_cache_or_alone(case):
    kv = kv_with([], cache=case != "no cache")
    req = make_req("r", SHARED + [2, 3])
    scheduled = [] if case == "nothing scheduled" else [
        make_req("o", SHARED + [1], namespace="other" if case == "namespace" else "")]
    assert not shares_uncached_prefix(req, scheduled, kv)
