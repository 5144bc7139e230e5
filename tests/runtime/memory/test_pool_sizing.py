"""KV pool sizing: from the memory fraction, capped by context x requests, overridden by an
explicit max_total_tokens; always whole pages and never over budget."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.memory.pool_sizing import (
    device_memory_bytes,
    kv_bytes_per_token,
    size_kv_pool,
)

GIB = 2**30
# SmolLM2-135M in float32: 30 layers x 3 KV heads x 64 dims x 2 (K, V) x 4 bytes.
SMOLLM2_BPT = kv_bytes_per_token(30, 3, 64, 4)


def size(**kw):
    base = dict(available_bytes=8 * GIB, weights_bytes=540 * 2**20, bytes_per_token=SMOLLM2_BPT,
                mem_fraction=0.25, context_length=8192, max_running_requests=256, page_size=16)
    return size_kv_pool(**{**base, **kw})


def test_smollm2_bytes_per_token_is_45_kib():
    assert SMOLLM2_BPT == 46080


def test_memory_decides_when_it_is_the_smaller_bound():
    pool = size()
    budget = 2 * GIB - 540 * 2**20
    assert pool.limited_by == "memory" and pool.tokens % 16 == 0
    assert budget - 16 * SMOLLM2_BPT < pool.bytes <= budget


def test_context_times_requests_caps_the_pool():
    pool = size(context_length=1000, max_running_requests=4, page_size=16)
    assert (pool.tokens, pool.limited_by) == (4000, "context x requests")


def test_explicit_max_total_tokens_overrides_and_rounds_up_to_pages():
    pool = size(max_total_tokens=100, available_bytes=1)
    assert (pool.tokens, pool.limited_by) == (112, "max_total_tokens")
    assert pool.bytes == 112 * SMOLLM2_BPT


@pytest.mark.parametrize("kw", [{"available_bytes": 2 * GIB}, {"mem_fraction": 0.01}])
def test_no_room_after_the_weights_says_which_flag_to_change(kw):
    with pytest.raises(ValueError, match="--mem-fraction-static or set --max-total-tokens"):
        size(**{"weights_bytes": GIB, **kw})


@pytest.mark.parametrize("fraction", [0.0, 1.5, -0.1])
def test_fraction_outside_unit_interval_is_refused(fraction):
    with pytest.raises(ValueError, match="mem_fraction_static"):
        size(mem_fraction=fraction)


@given(available=st.integers(GIB // 4, 64 * GIB), weights=st.integers(0, GIB // 8),
       bpt=st.integers(1, 10**6), fraction=st.floats(0.5, 1.0),
       context=st.integers(2, 10**5), requests=st.integers(1, 1024),
       page=st.sampled_from([1, 4, 16, 64]))
def test_whole_pages_within_budget_and_cap(available, weights, bpt, fraction, context,
                                           requests, page):
    try:
        pool = size_kv_pool(available_bytes=available, weights_bytes=weights,
                            bytes_per_token=bpt, mem_fraction=fraction, context_length=context,
                            max_running_requests=requests, page_size=page)
    except ValueError:
        assert int(available * fraction) - weights < page * bpt
        return
    assert pool.tokens % page == 0 and pool.tokens >= page
    assert pool.tokens <= -(-context * requests // page) * page
    assert pool.bytes <= int(available * fraction) - weights
    assert pool.bytes == pool.tokens * bpt


def test_host_memory_probe_reports_something_plausible():
    assert 2**20 < device_memory_bytes("cpu") < 2**50
