"""A speculative verify's decode rows attended together (avx512_attention_decode.h's
decode_rows: one request's rows whose slots are prefixes of the last row's) give each row's
bits alone: the runtime's exactness needs a verify row to equal the one-token step. Odd
lengths, head sizes 64 and 128, 1 to 8 query heads per KV head, runs longer than the kernel
takes together, verify rows beside other requests, a logit cap and sliding windows."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu import row_ops

pytestmark = pytest.mark.skipif(
    not row_ops.AVX512_DECODE,
    reason="radixlm.kernels.cpu.native.avx512_attention is not built or this CPU lacks AVX-512 "
           "(python setup.py build_ext --inplace)")


def _attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, rows: list[list[int]],
            cap: float, window: int) -> torch.Tensor:
    """The native decode attention of q [B, Hq, D], row b over the slots rows[b]."""
    indptr = torch.tensor([0] + [len(r) for r in rows]).cumsum(0)
    indices = torch.tensor([s for r in rows for s in r], dtype=torch.int64)
    return row_ops.decode_attention(q, k, v, indptr, indices, q.shape[2] ** -0.5, cap, window)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


@pytest.mark.parametrize(("hq", "hkv", "dim", "length", "drafts", "cap", "window"), [
    (9, 3, 64, 37, 1, 0.0, 0), (9, 3, 64, 200, 8, 0.0, 0), (4, 4, 128, 65, 5, 0.0, 0),
    (8, 1, 64, 1, 3, 0.0, 0), (16, 2, 128, 99, 20, 0.0, 0), (6, 2, 64, 50, 4, 30.0, 0),
    (9, 3, 64, 40, 6, 0.0, 64), (9, 3, 64, 70, 6, 0.0, 64)])
def test_a_verifys_rows_together_give_each_rows_bits_alone(hq, hkv, dim, length, drafts,
                                                           cap, window):
    gen = torch.Generator().manual_seed(length * 31 + drafts)
    pool = length + drafts + 40
    k = torch.randn(pool, 1, hkv, dim, generator=gen) * 2
    v = torch.randn(pool, 1, hkv, dim, generator=gen)
    slots = torch.randperm(pool, generator=gen)[:length + drafts + 1].tolist()
    other = torch.randperm(pool, generator=gen)[:23].tolist()  # another request's row
    verify = [slots[:length + 1 + r] for r in range(drafts + 1)]
    rows = verify + [other] + verify[:3]  # verify rows, a request alone, a second run
    q = torch.randn(len(rows), hq, dim, generator=gen)
    together = _attend(q, k, v, rows, cap, window)
    for b, row in enumerate(rows):
        alone = _attend(q[b:b + 1].contiguous(), k, v, [row], cap, window)
        assert torch.equal(_bits(together[b:b + 1]), _bits(alone)), f"row {b} differs"
