"""The KV pool's buffers: zero, contiguous, one per layer and kind, and on the CPU resident only
where written (views of one anonymous memory map)."""

from __future__ import annotations

import pytest
import torch

from radixlm.runtime.load_memory import rss_mib
from radixlm.runtime.memory.kv_pool import KVPool


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_buffers_are_zero_separate_and_page_aligned(dtype):
    pool = KVPool(3, 10, 2, 3, 8, dtype, torch.device("cpu"))
    buffers = pool.k_buffers + pool.v_buffers
    assert len(buffers) == 6 and pool.num_slots == 20
    for b in buffers:
        assert b.shape == (10, 2, 3, 8) and b.dtype == dtype and b.is_contiguous()
        assert b.data_ptr() % 4096 == 0 and not b.any()
    pool.k_buffers[1][4, 1] = 2.5  # one slot of one layer's K
    assert pool.k_buffers[1][4, 1].eq(2.5).all() and pool.k_buffers[1].sum() == 2.5 * 24
    assert not any(b.any() for i, b in enumerate(buffers) if i != 1)
    assert pool.nbytes() == 6 * 10 * 2 * 3 * 8 * b.element_size()


def test_a_cpu_pool_takes_memory_only_where_written():
    if rss_mib() is None:
        pytest.skip("no /proc: RSS unknown")
    before = rss_mib()[0]
    pool = KVPool(4, 16384, 1, 8, 64, torch.float32, torch.device("cpu"))  # 256 MiB
    assert rss_mib()[0] - before < 32
    pool.k_buffers[0][:4096] = 1.0  # 8 MiB written
    assert rss_mib()[0] - before < 40
    assert pool.k_buffers[0][:4096].eq(1.0).all() and not pool.k_buffers[0][4096:].any()
