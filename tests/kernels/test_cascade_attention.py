"""Cascade attention (shared cached prefixes read once per group) equals plain attention."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.reference import attention_common, extend_attention
from radixlm.kernels.reference.decode_attention import decode_attention_ref, plan_decode_padded
from radixlm.kernels.reference.extend_attention import extend_attention_ref


def dense(q_rows, keys, values, q_pos, sm_scale, cap):
    """Naive attention of query rows at absolute positions over keys 0..max(q_pos)."""
    hq, hkv = q_rows.shape[1], keys.shape[1]
    k = keys.repeat_interleave(hq // hkv, dim=1)
    v = values.repeat_interleave(hq // hkv, dim=1)
    s = torch.einsum("qhd,khd->hqk", q_rows, k) * sm_scale
    if cap > 0:
        s = cap * torch.tanh(s / cap)
    visible = torch.arange(keys.shape[0])[None, :] <= torch.tensor(q_pos)[:, None]
    s = s.masked_fill(~visible[None], float("-inf"))
    return torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v)


def sharing_workload(gen, page_size):
    """Requests over a pool where groups share long slot prefixes (two levels + a loner)."""
    doc = torch.arange(page_size * 8, page_size * 8 + 300)
    shapes = [(300, 5), (300, 9), (240, 3), (240, 1), (100, 4), (0, 70), (180, 6)]
    seqs, next_free = [], 5000
    for shared, own in shapes:
        extra = int(torch.randint(1, 30, (1,), generator=gen))
        tail = torch.arange(next_free, next_free + extra + own)
        next_free += extra + own + page_size
        seqs.append((torch.cat([doc[:shared], tail]), own))
    return seqs


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize(("hkv", "group"), [(1, 4), (2, 3)])
@pytest.mark.parametrize("cap", [0.0, 4.0])
def test_cascade_matches_dense_attention(seed, hkv, group, cap):
    gen = torch.Generator().manual_seed(seed)
    d, ps = 32, 4
    kc = torch.randn(2000, ps, hkv, d, generator=gen)
    vc = torch.randn(2000, ps, hkv, d, generator=gen)
    seqs = sharing_workload(gen, ps)
    flat_k, flat_v = kc.view(-1, hkv, d), vc.view(-1, hkv, d)
    # extend: each request's last `own` tokens are new queries
    qo, kv = [0], [0]
    for slots, own in seqs:
        qo.append(qo[-1] + own)
        kv.append(kv[-1] + len(slots))
    q = torch.randn(qo[-1], hkv * group, d, generator=gen)
    indices = torch.cat([s for s, _ in seqs])
    assert extend_attention._groups(torch.tensor(qo), torch.tensor(kv), indices), \
        "the workload must exercise the cascade path"
    got = extend_attention_ref(q, kc, vc, torch.tensor(qo), torch.tensor(kv), indices, 0.2, cap)
    for i, (slots, own) in enumerate(seqs):
        pos = list(range(len(slots) - own, len(slots)))
        ref = dense(q[qo[i]:qo[i + 1]], flat_k[slots], flat_v[slots], pos, 0.2, cap)
        torch.testing.assert_close(got[qo[i]:qo[i + 1]], ref, atol=2e-5, rtol=1e-4)
    # decode: one query per request at its last position
    qd = torch.randn(len(seqs), hkv * group, d, generator=gen)
    lens = torch.tensor([len(s) for s, _ in seqs])
    padded = torch.nn.utils.rnn.pad_sequence([s for s, _ in seqs], batch_first=True)
    plan = plan_decode_padded(padded, lens, ps)
    assert plan.groups, "the workload must exercise the cascade path"
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)])
    got_d = decode_attention_ref(qd, kc, vc, indptr, indices, 0.2, cap, plan=plan)
    for i, (slots, _) in enumerate(seqs):
        ref = dense(qd[i:i + 1], flat_k[slots], flat_v[slots], [len(slots) - 1], 0.2, cap)
        torch.testing.assert_close(got_d[i:i + 1], ref, atol=2e-5, rtol=1e-4)


def test_grouping_prefers_the_largest_saving():
    slots = torch.stack([torch.arange(200)] * 3 + [torch.cat([torch.arange(80),
                                                             torch.arange(500, 620)])])
    lens = torch.full((4,), 200)
    groups = attention_common.shared_prefix_groups(slots, lens, lens - 1)
    assert [(g.members.tolist(), g.prefix.numel()) for g in groups] == [([0, 1, 2], 199)]
