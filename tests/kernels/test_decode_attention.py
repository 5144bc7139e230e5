"""Decode attention: the reference against dense attention, the Triton kernel against both."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

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
    randn,
    random_lengths,
)

from radixlm.kernels import decode_attention_ref, plan_decode, plan_decode_padded


@dataclass(frozen=True)
class DecodeCase(AttnCase):
    splits: int = 1
    max_len: int = 90

    def extra_label(self) -> str:
        return f"-s{self.splits}"


FAST = [
    DecodeCase(64, 2, 1, 1),
    DecodeCase(64, 2, 2, 16, splits=3),
    DecodeCase(128, 1, 4, 16, splits=2, logit_cap=30.0),
    DecodeCase(128, 2, 8, 1, window=13),
    DecodeCase(96, 1, 2, 16, splits=4, logit_cap=5.0, window=20),  # head_dim not a power of 2
]
HALF = [
    DecodeCase(64, 2, 4, 16, splits=2, dtype=torch.bfloat16),
    DecodeCase(128, 1, 2, 1, dtype=torch.float16),
]
SLOW = [
    DecodeCase(d, 2, g, ps, splits=s, batch=5, max_len=300)
    for d in (64, 128) for g in (1, 2, 4, 8) for ps in (1, 16) for s in (1, 4)
] + [
    DecodeCase(128, 4, 2, 16, splits=s, logit_cap=cap, window=w, batch=6, max_len=300)
    for s in (1, 8) for cap, w in ((50.0, 0), (0.0, 64), (20.0, 100))
]


def build(case: DecodeCase, gen: torch.Generator,
          device: torch.device) -> tuple[torch.Tensor, PagedKV]:
    lens = random_lengths(gen, case.batch, case.page_size, case.max_len)
    kv = make_paged_kv(gen, lens, case.num_kv_heads, case.head_dim, case.page_size,
                       case.dtype, device)
    q = randn(gen, case.batch, case.num_heads, case.head_dim,
              dtype=case.dtype, device=device)  # [B, Hq, D]
    return q, kv


def run_ref(q: torch.Tensor, kv: PagedKV, case: DecodeCase) -> torch.Tensor:
    """The reference on float32 copies of the inputs."""
    return decode_attention_ref(
        q.float(), kv.k_cache.float(), kv.v_cache.float(), kv.kv_indptr, kv.kv_indices,
        case.sm_scale, case.logit_cap, case.window,
    )


@pytest.mark.parametrize("case", case_params(FAST + SLOW[::7]))
def test_reference_matches_dense(case: DecodeCase, gen: torch.Generator) -> None:
    q, kv = build(case, gen, torch.device("cpu"))
    expected = torch.stack([
        naive_attention(
            q[i : i + 1], kv.flat(kv.k_cache)[s], kv.flat(kv.v_cache)[s],
            torch.tensor([len(s) - 1]), case.sm_scale, case.logit_cap, case.window,
        )[0]
        for i, s in enumerate(kv.slots)
    ])
    assert_close(run_ref(q, kv, case), expected, 1e-5)


@pytest.mark.parametrize("plan_page_size", [1, 16], ids=["token-gather", "page-gather"])
def test_reference_uses_a_prebuilt_plan(plan_page_size: int, gen: torch.Generator) -> None:
    case = DecodeCase(64, 2, 2, 16, window=9)
    q, kv = build(case, gen, torch.device("cpu"))
    plan = plan_decode(kv.kv_indptr, kv.kv_indices, case.window, plan_page_size)
    out = decode_attention_ref(q, kv.k_cache, kv.v_cache, kv.kv_indptr, kv.kv_indices,
                               case.sm_scale, 0.0, case.window, plan=plan)
    assert_close(out, run_ref(q, kv, case), 1e-6)


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("window", [0, 7])
def test_one_request_on_consecutive_slots_reads_the_pool_in_place(
        page_size: int, window: int, gen: torch.Generator) -> None:
    """Batch 1 on consecutive slots (or pages): the plan reads a view of the pool, and its
    output is the gathered plan's, bit for bit; scattered slots keep the gather. A plan
    where every key is attended carries no mask."""
    case = DecodeCase(64, 2, 2, page_size, window=window)
    pages = 8 if page_size > 1 else 32
    k_cache = randn(gen, pages, page_size, 2, 64)
    v_cache = randn(gen, pages, page_size, 2, 64)
    q = randn(gen, 1, case.num_heads, 64)
    length = 3 * page_size - 1 if page_size > 1 else 21
    start = 2 * page_size  # not at the pool's beginning
    slots = torch.arange(start, start + length)[None]
    lens = torch.tensor([length])
    plan = plan_decode_padded(slots, lens, page_size, window)
    assert plan.span == (2 if page_size > 1 else start)
    indptr, indices = torch.tensor([0, length]), slots[0]

    def run(p):  # noqa: ANN001, ANN202
        return decode_attention_ref(q, k_cache, v_cache, indptr, indices, case.sm_scale, 0.0,
                                    window, plan=p)
    assert torch.equal(run(plan), run(replace(plan, span=-1)))
    # no padding and no window: no mask either, and the same result as an all-True one
    assert (plan.mask is None) == (window == 0 and page_size == 1)
    all_true = torch.ones(1, 1, 1, plan.max_len, dtype=torch.bool)
    if plan.mask is None:
        assert torch.equal(run(plan), run(replace(plan, span=-1, mask=all_true)))
    scattered = slots.clone()
    scattered[0, [0, 1]] = scattered[0, [1, 0]]
    assert plan_decode_padded(scattered, lens, page_size, window).span == -1


@pytest.mark.triton_interpret
@pytest.mark.parametrize(
    "case", case_params(FAST + HALF) + case_params(SLOW, pytest.mark.slow)
)
def test_triton_matches_reference(
    case: DecodeCase, gen: torch.Generator, device: torch.device
) -> None:
    from radixlm.kernels.triton.decode_attention import decode_attention_triton

    q, kv = build(case, gen, device)
    out = poisoned(tuple(q.shape), q.dtype, device)
    result = decode_attention_triton(
        q, kv.k_cache, kv.v_cache, kv.kv_indptr, kv.kv_indices, case.sm_scale,
        case.logit_cap, case.window, out=out, num_kv_splits=case.splits,
    )
    assert result is out
    assert_close(out.float(), run_ref(q, kv, case), TOL[case.dtype])


@pytest.mark.triton_interpret
def test_triton_default_splits_and_plan(gen: torch.Generator, device: torch.device) -> None:
    """As the model calls it: positional args, a plan (ignored), default splits, int64 indptr."""
    from radixlm.kernels.triton.decode_attention import decode_attention_triton

    case = DecodeCase(64, 2, 4, 16, batch=3)
    q, kv = build(case, gen, device)
    kv.kv_indptr = kv.kv_indptr.long()
    plan = plan_decode(kv.kv_indptr, kv.kv_indices)
    out = decode_attention_triton(q, kv.k_cache, kv.v_cache, kv.kv_indptr, kv.kv_indices,
                                  case.sm_scale, 0.0, 0, plan=plan)
    assert_close(out, run_ref(q, kv, case), TOL[case.dtype])


@pytest.mark.triton_interpret
def test_triton_request_without_keys_gets_zeros(gen: torch.Generator,
                                                device: torch.device) -> None:
    """A request with no KV (the reference refuses it; checking would cost a sync) gets a
    zero output, never NaN, and its neighbours are unaffected."""
    from radixlm.kernels.triton.decode_attention import decode_attention_triton

    case = DecodeCase(64, 2, 4, 16, batch=4)
    q, kv = build(case, gen, device)
    start, end = int(kv.kv_indptr[1]), int(kv.kv_indptr[2])
    kv.kv_indices = torch.cat((kv.kv_indices[:start], kv.kv_indices[end:]))
    kv.kv_indptr[2:] -= end - start  # request 1 now owns no keys
    out = decode_attention_triton(q, kv.k_cache, kv.v_cache, kv.kv_indptr, kv.kv_indices,
                                  case.sm_scale, out=poisoned(tuple(q.shape), q.dtype, device),
                                  num_kv_splits=3)
    assert torch.equal(out[1], torch.zeros_like(out[1]))
    keep = [0, 2, 3]
    kv.kv_indptr = torch.cat((kv.kv_indptr[:2], kv.kv_indptr[3:]))
    assert_close(out[keep], run_ref(q[keep], kv, case), TOL[case.dtype])


BAD_ARGS: list[BadArg] = [
    ("q-2d", lambda a: a.update(q=a["q"][0]), ValueError, "q: expected 3 dimensions"),
    ("q-int", lambda a: a.update(q=a["q"].int()), TypeError, "q: expected dtype"),
    ("q-heads", lambda a: a.update(q=a["q"][:, :3].contiguous()), ValueError, "q: num_heads"),
    ("q-head-dim", lambda a: a.update(q=a["q"][:, :, :32].contiguous()), ValueError,
     "k_cache: expected size 32"),
    ("q-strided-dim", lambda a: a.update(q=a["q"].transpose(1, 2).contiguous()
                                         .transpose(1, 2)), ValueError, "q: expected the last"),
    ("k-dtype", lambda a: a.update(k_cache=a["k_cache"].half()), TypeError, "k_cache: expected"),
    ("v-shape", lambda a: a.update(v_cache=a["v_cache"][:2]), ValueError, "v_cache: expected"),
    ("k-noncontig", lambda a: a.update(k_cache=a["k_cache"].transpose(0, 1)), ValueError,
     "k_cache: expected a contiguous"),
    ("indptr-len", lambda a: a.update(kv_indptr=a["kv_indptr"][:-1]), ValueError,
     "kv_indptr: expected 5 entries"),
    ("indices-float", lambda a: a.update(kv_indices=a["kv_indices"].float()), TypeError,
     "kv_indices: expected dtype"),
    ("indices-device", lambda a: a.update(kv_indices=a["kv_indices"].to("meta")), ValueError,
     "kv_indices: expected a tensor on"),
    ("out-shape", lambda a: a.update(out=a["q"][:2].clone()), ValueError, "out: expected"),
    ("splits", lambda a: a.update(num_kv_splits=99), ValueError, "num_kv_splits"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(BAD_ARGS))
def test_triton_rejects_bad_arguments_before_launch(
    mutate: Callable[[dict], None], exc: type[Exception], match: str, gen: torch.Generator,
    no_launch: None,
) -> None:
    from radixlm.kernels.triton.decode_attention import decode_attention_triton

    q, kv = build(DecodeCase(64, 2, 2, 16), gen, torch.device("cpu"))
    args = dict(q=q, k_cache=kv.k_cache, v_cache=kv.v_cache, kv_indptr=kv.kv_indptr,
                kv_indices=kv.kv_indices, sm_scale=0.125)
    assert_rejected(decode_attention_triton, args, mutate, exc, match)
