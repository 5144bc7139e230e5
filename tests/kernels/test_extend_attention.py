"""Extend attention: the reference against dense causal attention, the Triton kernel against both.

Each request has a cached prefix (possibly empty) and new tokens; its KV list is the prefix
slots followed by the new tokens' slots.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pytest
import torch
from kernel_testlib import (
    TOL,
    AttnCase,
    BadArg,
    PagedKV,
    assert_close,
    assert_rejected,
    bad_arg_params,
    case_params,
    make_paged_kv,
    naive_attention,
    poisoned,
    randint,
    randn,
)

from radixlm.kernels import extend_attention_ref


@dataclass(frozen=True)
class ExtendCase(AttnCase):
    """batch >= 4: an empty prefix, one new token, a mid-page prefix, > 64 new tokens."""

    max_prefix: int = 60
    max_new: int = 40


FAST = [
    ExtendCase(64, 2, 1, 1),
    ExtendCase(64, 1, 2, 16, logit_cap=30.0),
    ExtendCase(128, 2, 4, 16, window=11),
    ExtendCase(128, 1, 8, 1, logit_cap=10.0, window=70),
    ExtendCase(96, 2, 2, 16),  # head_dim not a power of 2
    # prefill chunks of several query-row blocks (128 rows each) after a prefix
    ExtendCase(64, 3, 3, 1, batch=4, max_prefix=300, max_new=300),
    ExtendCase(64, 1, 2, 1, batch=4, max_new=300, logit_cap=20.0, window=150),
]
HALF = [
    ExtendCase(64, 2, 4, 16, dtype=torch.bfloat16),
    ExtendCase(128, 1, 2, 1, dtype=torch.float16),
]
SLOW = [
    ExtendCase(d, 2, g, ps, batch=6, max_prefix=200, max_new=100)
    for d in (64, 128) for g in (1, 2, 4, 8) for ps in (1, 16)
] + [
    ExtendCase(128, 2, 2, 16, logit_cap=cap, window=w, batch=6, max_prefix=200, max_new=150)
    for cap, w in ((50.0, 0), (0.0, 64), (20.0, 100))
]


@dataclass
class ExtendBatch:
    q: torch.Tensor  # [T, Hq, D]: every request's new tokens, concatenated
    kv: PagedKV
    qo_indptr: torch.Tensor  # [B + 1]
    prefixes: list[int]
    news: list[int]


def build(case: ExtendCase, gen: torch.Generator, device: torch.device) -> ExtendBatch:
    """Requests with an empty prefix, a single new token, a mid-page prefix and > 64 new
    tokens (two query blocks of the Triton kernel) among random others."""
    ps = case.page_size
    prefixes = [0, randint(gen, 1, case.max_prefix), randint(gen, 0, 3) * ps + ps // 2 + 1]
    news = [randint(gen, 1, case.max_new), 1, randint(gen, 2, case.max_new)]
    for _ in range(case.batch - 3):
        prefixes.append(randint(gen, 0, case.max_prefix))
        news.append(randint(gen, 1, case.max_new))
    news[-1] = randint(gen, 65, 65 + case.max_new)
    lens = [p + n for p, n in zip(prefixes, news, strict=True)]
    kv = make_paged_kv(gen, lens, case.num_kv_heads, case.head_dim, ps, case.dtype, device)
    qo_indptr = torch.tensor([0, *torch.tensor(news).cumsum(0).tolist()], dtype=torch.int32)
    q = randn(gen, sum(news), case.num_heads, case.head_dim,
              dtype=case.dtype, device=device)
    return ExtendBatch(q, kv, qo_indptr.to(device), prefixes, news)


def run_ref(b: ExtendBatch, case: ExtendCase) -> torch.Tensor:
    """The reference on float32 copies of the inputs."""
    return extend_attention_ref(
        b.q.float(), b.kv.k_cache.float(), b.kv.v_cache.float(), b.qo_indptr, b.kv.kv_indptr,
        b.kv.kv_indices, case.sm_scale, case.logit_cap, case.window,
    )


@pytest.mark.parametrize("case", case_params(FAST + SLOW[::5]))
def test_reference_matches_dense(case: ExtendCase, gen: torch.Generator) -> None:
    b = build(case, gen, torch.device("cpu"))
    parts, row = [], 0
    for prefix, n, slots in zip(b.prefixes, b.news, b.kv.slots, strict=True):
        parts.append(naive_attention(
            b.q[row : row + n], b.kv.flat(b.kv.k_cache)[slots], b.kv.flat(b.kv.v_cache)[slots],
            torch.arange(prefix, prefix + n), case.sm_scale, case.logit_cap, case.window,
        ))
        row += n
    assert_close(run_ref(b, case), torch.cat(parts), 1e-5)


@pytest.mark.triton_interpret
@pytest.mark.parametrize(
    "case", case_params(FAST + HALF) + case_params(SLOW, pytest.mark.slow)
)
def test_triton_matches_reference(
    case: ExtendCase, gen: torch.Generator, device: torch.device
) -> None:
    from radixlm.kernels.triton.extend_attention import extend_attention_triton

    b = build(case, gen, device)
    out = poisoned(tuple(b.q.shape), b.q.dtype, device)
    result = extend_attention_triton(
        b.q, b.kv.k_cache, b.kv.v_cache, b.qo_indptr, b.kv.kv_indptr, b.kv.kv_indices,
        case.sm_scale, case.logit_cap, case.window, out=out,
    )
    assert result is out
    assert_close(out.float(), run_ref(b, case), TOL[case.dtype])


@pytest.mark.triton_interpret
def test_triton_skips_requests_without_new_tokens(
    gen: torch.Generator, device: torch.device
) -> None:
    """A request with a prefix but no new token contributes no rows (as in the reference)."""
    from radixlm.kernels.triton.extend_attention import extend_attention_triton

    case = ExtendCase(64, 2, 2, 16)
    b = build(case, gen, device)
    b.qo_indptr[2:] -= b.news[1]  # request 1 keeps its KV but loses its one new token
    b.q = torch.cat((b.q[: b.news[0]], b.q[b.news[0] + 1 :]))
    out = extend_attention_triton(b.q, b.kv.k_cache, b.kv.v_cache, b.qo_indptr,
                                  b.kv.kv_indptr.long(), b.kv.kv_indices, case.sm_scale)
    assert_close(out, run_ref(b, case), TOL[case.dtype])


BAD_ARGS: list[BadArg] = [
    ("q-4d", lambda a: a.update(q=a["q"][None]), ValueError, "q: expected 3 dimensions"),
    ("q-heads", lambda a: a.update(q=a["q"][:, :3].contiguous()), ValueError, "q: num_heads"),
    ("v-dtype", lambda a: a.update(v_cache=a["v_cache"].double()), TypeError,
     "v_cache: expected dtype in"),
    ("qo-shape", lambda a: a.update(qo_indptr=a["qo_indptr"][:-1]), ValueError,
     "qo_indptr: expected the shape of kv_indptr"),
    ("qo-dtype", lambda a: a.update(qo_indptr=a["qo_indptr"].short()), TypeError,
     "qo_indptr: expected dtype"),
    ("qo-total", lambda a: a.update(q=a["q"][:-1]), ValueError, "qo_indptr: last entry"),
    ("kv-too-short", lambda a: a.update(kv_indptr=torch.zeros_like(a["kv_indptr"])),
     ValueError, "kv_indptr: a request has fewer KV tokens"),
    ("indptr-noncontig", lambda a: a.update(kv_indptr=a["kv_indptr"].repeat_interleave(2)[::2]),
     ValueError, "kv_indptr: expected a contiguous"),
    ("out-dtype", lambda a: a.update(out=a["q"].double()), ValueError, "out: expected"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(BAD_ARGS))
def test_triton_rejects_bad_arguments_before_launch(
    mutate: Callable[[dict], None], exc: type[Exception], match: str, gen: torch.Generator,
    no_launch: None,
) -> None:
    from radixlm.kernels.triton.extend_attention import extend_attention_triton

    b = build(ExtendCase(64, 2, 2, 16), gen, torch.device("cpu"))
    args = dict(q=b.q, k_cache=b.kv.k_cache, v_cache=b.kv.v_cache, qo_indptr=b.qo_indptr,
                kv_indptr=b.kv.kv_indptr, kv_indices=b.kv.kv_indices, sm_scale=0.125)
    assert_rejected(extend_attention_triton, args, mutate, exc, match)


@pytest.mark.parametrize("prefix, new, questions", [(0, 300, 1), (200, 140, 1), (97, 5, 3)])
def test_consecutive_slots_read_as_pool_views(prefix: int, new: int, questions: int,
                                              gen: torch.Generator) -> None:
    """Slots that run consecutively (a prefill chunk after its own earlier chunks, a cached
    document on a fresh pool) are read as views of the pool, not gathered: same attention.
    With several questions the document is a shared prefix (cascade) on consecutive slots and
    each question's own slots follow one another after it."""
    hkv, group, d = 2, 3, 64
    pool = prefix + questions * new + 7
    k_cache, v_cache = randn(gen, pool, 1, hkv, d), randn(gen, pool, 1, hkv, d)
    q = randn(gen, questions * new, hkv * group, d)
    lists = [torch.cat([torch.arange(prefix), torch.arange(prefix + i * new, prefix + (i + 1)
                                                          * new)]) for i in range(questions)]
    kv_indptr = torch.tensor([0] + [(prefix + new) * (i + 1) for i in range(questions)])
    qo_indptr = torch.tensor([new * i for i in range(questions + 1)])
    out = extend_attention_ref(q, k_cache, v_cache, qo_indptr, kv_indptr, torch.cat(lists),
                               0.125)
    flat_k, flat_v = k_cache.view(pool, hkv, d), v_cache.view(pool, hkv, d)
    want = torch.cat([naive_attention(q[i * new:(i + 1) * new], flat_k[s], flat_v[s],
                                      torch.arange(prefix, prefix + new), 0.125)
                      for i, s in enumerate(lists)])
    assert_close(out, want, 1e-5)
