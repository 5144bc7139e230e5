"""WorkerPool: in-flight counts, rid holders, a dead worker out of rotation (and back)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radixlm.router.policy import CacheAware, NoReplicaError, RoundRobin
from radixlm.router.worker_pool import WorkerPool

URLS = ["http://a:1", "http://b:1"]


@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3)), max_size=40))
def test_in_flight_counts_what_was_acquired_and_not_released(ops):
    pool = WorkerPool(URLS, RoundRobin())
    held: list[str] = []
    for acquire, _ in ops:
        if acquire or not held:
            held.append(pool.acquire([1, 2]))
        else:
            pool.release(held.pop())
        assert sum(w.in_flight for w in pool.workers.values()) == len(held)
        assert all(pool.workers[u].in_flight == held.count(u) for u in URLS)


def test_rids_name_their_holder_until_released():
    pool = WorkerPool(URLS, RoundRobin())
    url = pool.acquire([1], rids=["r1", "r2"])
    assert pool.holder("r1") == pool.holder("r2") == url
    pool.release(url, rids=["r1", "r2"])
    assert pool.holder("r1") is None


def test_a_dead_worker_leaves_the_rotation_and_its_tree_and_can_rejoin():
    policy = CacheAware()
    pool = WorkerPool(URLS, policy)
    doc = list(range(50))
    holder = pool.acquire(doc)
    assert pool.mark_dead(holder, "scheduler died") and not pool.mark_dead(holder, "again")
    assert holder not in policy.tree.match(doc)
    (other,) = set(URLS) - {holder}
    assert {pool.acquire(doc) for _ in range(3)} == {other}
    assert pool.status()[URLS.index(holder)]["error"] == "scheduler died"
    assert pool.mark_alive(holder) and pool.workers[holder].alive


def test_no_live_worker_is_an_error_naming_each_one():
    pool = WorkerPool(URLS, RoundRobin())
    for url in URLS:
        pool.mark_dead(url, f"{url} is gone")
    with pytest.raises(NoReplicaError, match=r"http://a:1: http://a:1 is gone"):
        pool.acquire([1])
