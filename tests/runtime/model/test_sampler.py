"""Batched sampling: filters, penalties, seeds and logprobs against direct computations."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.model.sampler import (
    MIN_LOGPROB,
    SampleRow,
    _filter_probs,
    apply_penalties,
    argmax_rows,
    sample,
)
from radixlm.runtime.wire.sampling_params import SamplingParams


def row(**kw) -> SampleRow:
    return SampleRow(params=SamplingParams(**kw), output_ids=[], prompt_ids=[])


def test_top_k_top_p_min_p_keep_exactly_the_expected_tokens():
    probs = torch.tensor([[0.5, 0.2, 0.15, 0.1, 0.05]] * 3)
    rows = [row(top_k=2), row(top_p=0.8), row(min_p=0.25)]
    kept = _filter_probs(probs, rows) > 0
    assert kept.tolist() == [
        [True, True, False, False, False],  # top-2
        [True, True, True, False, False],  # 0.5 + 0.2 < 0.8, adding 0.15 crosses it
        [True, True, True, False, False],  # >= 0.25 * 0.5
    ]


def test_penalties_follow_openai_and_hf_definitions():
    logits = torch.tensor([[2.0, -1.0, 0.5, 3.0]])
    r = SampleRow(params=SamplingParams(frequency_penalty=0.5, presence_penalty=0.25,
                                        repetition_penalty=2.0),
                  output_ids=[0, 0, 1], prompt_ids=[3])
    apply_penalties(logits, [r])
    # token 0: 2 - 0.5*2 - 0.25 = 0.75, then /2 (seen, positive); token 1: -1 - 0.5 - 0.25 =
    # -1.75, then *2; token 2 untouched; token 3 (prompt): 3 / 2
    torch.testing.assert_close(logits, torch.tensor([[0.375, -3.5, 0.5, 1.5]]))


@given(st.lists(st.lists(st.sampled_from([-1.0, 0.0, 2.5, float("-inf")]), min_size=1,
                         max_size=40), min_size=1, max_size=6).filter(
    lambda rows: len({len(r) for r in rows}) == 1))
def test_argmax_rows_is_argmax_first_maximum_on_ties(rows):
    x = torch.tensor(rows)
    assert torch.equal(argmax_rows(x), x.argmax(dim=-1))


def test_greedy_and_logprobs():
    logits = torch.randn(3, 50, generator=torch.Generator().manual_seed(0))
    expected_lp = torch.log_softmax(logits, -1)
    res = sample(logits.clone(), [row(temperature=0.0)] * 3, torch.Generator(), True, 4)
    assert res.next_ids == logits.argmax(-1).tolist()
    for i, t in enumerate(res.next_ids):
        assert res.logprobs[i] == pytest.approx(expected_lp[i, t].item(), abs=1e-6)
        assert [tid for _, tid in res.top_logprobs[i]] == expected_lp[i].topk(4).indices.tolist()


def test_masked_logprobs_are_the_masked_distribution_and_finite():
    """A constraint's mask (-inf logits) gives the renormalised distribution over the allowed
    tokens; forbidden ones report the finite floor, and top-k asked beyond V is clamped."""
    logits = torch.randn(2, 6, generator=torch.Generator().manual_seed(1))
    allowed = [1, 4]
    masked = torch.full_like(logits, float("-inf"))
    masked[:, allowed] = logits[:, allowed]
    res = sample(masked.clone(), [row(temperature=0.0), row(temperature=1.0, seed=3)],
                 torch.Generator(), True, 100)
    expected = torch.log_softmax(logits[:, allowed], -1)
    for i, t in enumerate(res.next_ids):
        assert t in allowed
        assert res.logprobs[i] == pytest.approx(expected[i, allowed.index(t)].item(), abs=1e-6)
        top = res.top_logprobs[i]
        assert len(top) == 6 and {tid for _, tid in top[:2]} == set(allowed)
        assert [lp for lp, _ in top[2:]] == [MIN_LOGPROB] * 4


def test_banned_ids_are_never_chosen():
    logits = torch.zeros(1, 10)
    logits[0, 3] = 100.0
    r = SampleRow(params=SamplingParams(temperature=0.0), output_ids=[], prompt_ids=[],
                  banned_ids=[3])
    assert sample(logits, [r], torch.Generator()).next_ids[0] != 3


def test_sampling_matches_the_distribution_and_seeds_repeat():
    logits = torch.log(torch.tensor([[0.6, 0.3, 0.1]]))
    gen = torch.Generator().manual_seed(1)
    draws = [sample(logits.clone(), [row(temperature=1.0)], gen).next_ids[0]
             for _ in range(3000)]
    freq = torch.bincount(torch.tensor(draws), minlength=3).float() / len(draws)
    torch.testing.assert_close(freq, torch.tensor([0.6, 0.3, 0.1]), atol=0.03, rtol=0)
    seeded = [SampleRow(params=SamplingParams(temperature=1.0, seed=5), output_ids=[],
                        prompt_ids=[], step=s) for s in range(20)]
    a = [sample(logits.clone(), [r], torch.Generator()).next_ids[0] for r in seeded]
    b = [sample(logits.clone(), [r], torch.Generator().manual_seed(9)).next_ids[0]
         for r in seeded]
    assert a == b and len(set(a)) > 1
