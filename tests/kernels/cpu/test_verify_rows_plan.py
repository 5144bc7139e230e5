"""One request's verify rows (one-token decodes over its slot row, the scheduler's layout)
take the native decode kernel at any length, as its plain decode step does, so each row's
attention is bit-equal to that step's; distinct requests past the bound keep the plan."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu import row_ops

needs_kernel = pytest.mark.skipif(not row_ops.row_ops_available(),
                                  reason="native row_ops not built")
LONG = row_ops.NATIVE_DECODE_MAX_KV  # rows x this is past the bound


def _pool(tokens: int, heads: int = 3, dim: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    return (torch.randn(tokens, 1, heads, dim, generator=gen),
            torch.randn(tokens, 1, heads, dim, generator=gen))


@needs_kernel
def test_one_requests_rows_run_native_and_match_its_decode_step():
    k_cache, v_cache = _pool(LONG + 16)
    row = torch.arange(LONG + 9)
    n = 9  # the newest token and 8 drafts
    lens = torch.tensor([LONG + j + 1 for j in range(n)])
    slots = row.expand(n, -1).contiguous()
    assert row_ops.plan_decode(slots, lens) is None
    q = torch.randn(n, 9, 64, generator=torch.Generator().manual_seed(1))
    indptr = torch.cat([torch.zeros(1, dtype=torch.int64), torch.cumsum(lens, 0)])
    indices = torch.cat([row[:int(length)] for length in lens])
    rows = row_ops.decode_attention(q, k_cache, v_cache, indptr, indices, 0.125)
    for j in range(n):  # each row alone: a plain decode step of one request
        one = row_ops.decode_attention(q[j : j + 1], k_cache, v_cache,
                                       torch.tensor([0, int(lens[j])]),
                                       row[: int(lens[j])].contiguous(), 0.125)
        assert torch.equal(one[0], rows[j])


@needs_kernel
def test_distinct_requests_past_the_bound_keep_the_plan():
    shared = torch.arange(LONG)
    slots = torch.stack([torch.cat([shared, torch.tensor([LONG + i])]) for i in range(4)])
    lens = torch.full((4,), LONG + 1)
    assert row_ops.plan_decode(slots, lens) is not None
