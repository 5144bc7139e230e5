"""KV pool sizing: context x sequences (on the CPU by default 8 of them) capped by the memory
fraction, overridden by an explicit max_total_tokens; always whole pages and never over budget.
Every number is hand-made: nothing here depends on this machine's free RAM (but the probe)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.memory.pool_sizing import (
    DEFAULT_CPU_SEQUENCES,
    device_memory_bytes,
    kv_bytes_per_token,
    pool_sequences,
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


def test_smollm2_on_the_cpu_by_default_is_8_contexts_not_a_quarter_of_ram():
    # The machine: a quarter of its free RAM less the weights held 112,646 tokens.
    available = 4 * (540 * 2**20 + 112_646 * SMOLLM2_BPT)
    before = size(available_bytes=available, page_size=1)
    assert (before.tokens, before.limited_by) == (112_646, "memory")
    assert DEFAULT_CPU_SEQUENCES == 8
    after = size(available_bytes=available, page_size=1,
                 max_running_requests=pool_sequences("cpu", None, False, 256))
    assert (after.tokens, after.limited_by) == (8 * 8192, "context x requests")
    assert after.bytes == 2880 * 2**20
    assert after.describe() == "8 x 8,192 tokens = 65,536 tokens, 2,880 MiB (context x requests)"


def test_memory_stays_an_upper_bound_and_the_log_gives_its_numbers():
    pool = size(available_bytes=4 * GIB, max_running_requests=8, page_size=1)
    assert (pool.tokens, pool.limited_by) == ((GIB - 540 * 2**20) // SMOLLM2_BPT, "memory")
    assert pool.describe() == (
        "11,013 tokens, 484 MiB (memory: 25% of 4.00 GiB available less 540 MiB of weights; "
        "8 x 8,192 tokens would take 2,880 MiB)")


def test_an_explicit_fraction_is_named_as_the_bound():
    pool = size(available_bytes=4 * GIB, mem_fraction_given=True, page_size=1)
    assert pool.limited_by == "mem_fraction_static"
    assert pool.describe().startswith("11,013 tokens, 484 MiB (mem_fraction_static: 25% of")


@pytest.mark.parametrize("kind, requested, fraction_given, expected", [
    ("cpu", None, False, DEFAULT_CPU_SEQUENCES),  # by need: the CPU default
    ("cpu", 3, False, 3),  # the user's concurrency, on any device
    ("cuda", 3, True, 3),
    ("cpu", None, True, 256),  # an explicit fraction: memory decides, as on CUDA
    ("cuda", None, False, 256),  # CUDA unchanged
])
def test_sequences_the_pool_is_sized_for(kind, requested, fraction_given, expected):
    assert pool_sequences(kind, requested, fraction_given, 256) == expected


def test_explicit_max_total_tokens_overrides_and_rounds_up_to_pages():
    pool = size(max_total_tokens=100, available_bytes=1)
    assert (pool.tokens, pool.limited_by) == (112, "max_total_tokens")
    assert pool.bytes == 112 * SMOLLM2_BPT
    assert pool.describe() == "112 tokens, 5 MiB (max_total_tokens)"


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
