"""The fused CPU partial attention and the shared-prefix decode read equal the references.

``partial_attention`` runs torch's fused flash kernel for float32 CPU tensors without a logit
cap; ``partial_attention_matmul`` is the explicit-softmax reference. Decode with shared
prefixes (cascade: the prefix read once per group, as a pool view when its slots are
consecutive) must equal the same decode with the reference softmax and with no cascade.
"""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.reference import attention_common, extend_attention
from radixlm.kernels.reference.attention_common import partial_attention, partial_attention_matmul
from radixlm.kernels.reference.decode_attention import decode_attention_ref, plan_decode_padded
from radixlm.kernels.reference.extend_attention import extend_attention_ref

ATOL, RTOL = 2e-6, 1e-5  # float32 rounding of a differently ordered sum


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("n", "hkv", "group", "length", "broadcast"),
                         [(5, 3, 3, 37, False), (7, 1, 5, 131, True), (1, 2, 96, 1553, False)])
@pytest.mark.parametrize("masked", [False, True])
def test_fused_partial_equals_matmul(seed, n, hkv, group, length, broadcast, masked):
    gen = torch.Generator().manual_seed(seed)
    d = 64
    q = torch.randn(n, hkv, group, d, generator=gen)
    kv_n = 1 if broadcast else n
    k = torch.randn(kv_n, hkv, length, d, generator=gen)
    v = torch.randn(kv_n, hkv, length, d, generator=gen)
    mask = None
    if masked:
        mask = torch.rand(n, 1, 1, length, generator=gen) < 0.6
        mask[0] = False  # a row that sees no key: zero output, -inf lse
    assert attention_common.fused_applies(q, k, 0.0)
    out, lse = partial_attention(q, k, v, mask, 0.3, 0.0)
    ref_out, ref_lse = partial_attention_matmul(q, k, v, mask, 0.3, 0.0)
    torch.testing.assert_close(out, ref_out, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(lse, ref_lse, atol=ATOL, rtol=RTOL)  # -inf where ref has it
    if masked:
        assert torch.isneginf(lse[0]).all() and not out[0].any()


def num_pages(page_size: int) -> int:
    return 3000 // page_size + 8


def _requests(gen: torch.Generator, page_size: int, batch: int, prefix: int, shared: bool,
              consecutive: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded page-structured slots [B, L] and lens [B]: an optional common prefix of
    ``prefix`` tokens (its pages in order, or shuffled), then each request's own pages."""
    pages = torch.randperm(num_pages(page_size) - 3, generator=gen) + 3
    prefix_pages = -(-prefix // page_size)
    doc_pages = torch.arange(3, 3 + prefix_pages) if consecutive else pages[:prefix_pages]
    free = iter(pages[prefix_pages:].tolist())
    rows, lens = [], []
    for _ in range(batch):
        own = int(torch.randint(1, 2 * page_size + 3, (1,), generator=gen))
        head = prefix if shared else 0
        n_pages = -(-(head + own) // page_size)
        # the prefix's full pages are shared; a partial last page is the request's own
        common = prefix // page_size if shared else 0
        mine = doc_pages[:common].tolist() + [next(free) for _ in range(n_pages - common)]
        slots = torch.tensor([p * page_size + o for p in mine for o in range(page_size)])
        rows.append(slots[:head + own])
        lens.append(head + own)
    return torch.nn.utils.rnn.pad_sequence(rows, batch_first=True), torch.tensor(lens)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize(("shared", "consecutive"), [(True, True), (True, False), (False, True)])
@pytest.mark.parametrize("seed", [0, 1])
def test_shared_prefix_decode_equals_references(page_size, shared, consecutive, seed,
                                                monkeypatch):
    gen = torch.Generator().manual_seed(seed)
    hkv, group, d, batch, prefix = 3, 3, 64, 7, 16 * 9 + 5
    k_cache = torch.randn(num_pages(page_size), page_size, hkv, d, generator=gen)
    v_cache = torch.randn_like(k_cache)
    slots, lens = _requests(gen, page_size, batch, prefix, shared, consecutive)
    q = torch.randn(batch, hkv * group, d, generator=gen)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)])
    indices = torch.cat([slots[b, :lens[b]] for b in range(batch)])
    plan = plan_decode_padded(slots, lens, page_size)
    assert bool(plan.groups) == shared, "the workload must (not) exercise the cascade path"
    if shared:
        assert (plan.prefix_spans[0] >= 0) == consecutive, "a pool view iff consecutive"
    got = decode_attention_ref(q, k_cache, v_cache, indptr, indices, 0.125, plan=plan)
    flat = plan_decode_padded(slots, lens, page_size, cascade=False)
    plain = decode_attention_ref(q, k_cache, v_cache, indptr, indices, 0.125, plan=flat)
    monkeypatch.setattr(attention_common, "fused_applies", lambda *_: False)
    matmul = decode_attention_ref(q, k_cache, v_cache, indptr, indices, 0.125, plan=plan)
    torch.testing.assert_close(got, matmul, atol=ATOL, rtol=RTOL)
    torch.testing.assert_close(got, plain, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("seed", [0, 1])
def test_batched_question_extend_equals_per_request(page_size, seed, monkeypatch):
    """Many short questions after one cached document (RAG): their own keys in one padded
    attention equal the per-request loop."""
    gen = torch.Generator().manual_seed(seed)
    hkv, group, d, batch, prefix = 3, 3, 64, 9, 16 * 7 + 3
    k_cache = torch.randn(num_pages(page_size), page_size, hkv, d, generator=gen)
    v_cache = torch.randn_like(k_cache)
    slots, lens = _requests(gen, page_size, batch, prefix, True, True)
    new = torch.minimum(torch.randint(1, 12, (batch,), generator=gen), lens - prefix)
    qo = torch.cat([torch.zeros(1, dtype=torch.long), new.cumsum(0)])
    kv = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)])
    indices = torch.cat([slots[b, :lens[b]] for b in range(batch)])
    q = torch.randn(int(qo[-1]), hkv * group, d, generator=gen)
    calls = []
    batched = extend_attention._own_keys_batched
    monkeypatch.setattr(extend_attention, "_own_keys_batched",
                        lambda *a: calls.append(batched(*a)) or calls[-1])
    got = extend_attention_ref(q, k_cache, v_cache, qo, kv, indices, 0.125)
    assert calls and len(calls[0]) == batch, "every question must take the batched path"
    monkeypatch.setattr(extend_attention, "_own_keys_batched", lambda *_: set())
    loop = extend_attention_ref(q, k_cache, v_cache, qo, kv, indices, 0.125)
    torch.testing.assert_close(got, loop, atol=ATOL, rtol=RTOL)
