"""The routing data structures: the approximate prefix tree and the three policies."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.router.approx_tree import ApproxPrefixTree
from radixlm.router.policy import CacheAware, NoReplicaError, make_policy

seqs = st.lists(st.integers(0, 5), min_size=1, max_size=12)
ops = st.lists(st.tuples(seqs, st.integers(0, 2)), min_size=1, max_size=30)


def brute_match(history: list[tuple[list[int], int]], tokens: list[int]) -> dict[int, int]:
    best: dict[int, int] = {}
    for seq, r in history:
        n = 0
        while n < min(len(seq), len(tokens)) and seq[n] == tokens[n]:
            n += 1
        if n:
            best[r] = max(best.get(r, 0), n)
    return best


@settings(max_examples=60, deadline=None)
@given(ops, seqs)
def test_match_is_each_replicas_longest_routed_prefix(history, probe):
    tree = ApproxPrefixTree()
    for seq, r in history:
        tree.insert(seq, r)
    assert tree.match(probe) == brute_match(history, probe)
    assert tree.entries == sum(tree.size_of.values())


@settings(max_examples=60, deadline=None)
@given(ops, st.integers(0, 20), seqs)
def test_evict_bounds_entries_and_only_forgets(history, cap, probe):
    tree = ApproxPrefixTree()
    for seq, r in history:
        tree.insert(seq, r)
    full, before = tree.match(probe), tree.entries
    tree.evict(cap)
    assert tree.entries <= cap
    assert tree.entries == sum(tree.size_of.values())
    after = tree.match(probe)
    assert all(after[r] <= full[r] for r in after)  # eviction never invents a match
    if cap >= before:
        assert after == full


@settings(max_examples=40, deadline=None)
@given(ops, st.integers(0, 2))
def test_remove_replica_forgets_it(history, gone):
    tree = ApproxPrefixTree()
    for seq, r in history:
        tree.insert(seq, r)
    tree.remove_replica(gone)
    for seq, _ in history:
        assert gone not in tree.match(seq)
    assert tree.entries == sum(tree.size_of.values())


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(seqs, st.dictionaries(st.integers(0, 3), st.integers(0, 100),
                                                 min_size=1)), min_size=1, max_size=20),
       st.sampled_from(["cache_aware", "round_robin", "shortest_queue"]))
def test_policies_pick_a_live_replica_and_balance(requests, name):
    policy = make_policy(name, balance_abs_threshold=8)
    for tokens, loads in requests:
        pick = policy.choose(tokens, loads)
        assert pick in loads
        if name == "shortest_queue" or (isinstance(policy, CacheAware)
                                        and policy.imbalanced(loads)):
            assert loads[pick] == min(loads.values())


def test_cache_aware_follows_the_prefix_until_the_load_is_imbalanced():
    policy = CacheAware(cache_threshold=0.5, balance_abs_threshold=4)
    doc_a, doc_b = [1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12]
    first = policy.choose(doc_a + [20], {0: 0, 1: 0})
    other = policy.choose(doc_b + [21], {0: 1, 1: 0})  # no match: the emptier tree
    assert other != first
    assert policy.choose(doc_a + [22], {0: 3, 1: 3}) == first
    assert policy.choose(doc_b + [23], {0: 3, 1: 3}) == other
    loads = {first: 9, other: 2}  # 9 - 2 > 4: least loaded, whatever the prefix
    assert policy.choose(doc_a + [24], loads) == other


def test_no_live_replica_is_a_clear_error():
    for name in ("cache_aware", "round_robin", "shortest_queue"):
        with pytest.raises(NoReplicaError, match="no live replica"):
            make_policy(name).choose([1], {})
    with pytest.raises(ValueError, match="unknown routing policy"):
        make_policy("random")
