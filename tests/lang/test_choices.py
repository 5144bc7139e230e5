"""The choice methods on SGLang's own mock logprobs (test/lang/test_choices.py semantics)."""

from __future__ import annotations

import math

import pytest

from radixlm.lang.choices import (
    greedy_token_selection,
    mean_logprob,
    token_length_normalized,
    total_logprob,
    unconditional_likelihood_normalized,
)

# "organ" = [organ], "organism" = [organ, ism], the long word = 8 tokens.
MOCK = {
    "choices": ["organ", "organism", "antidisestablishmentarianism"],
    "normalized_prompt_logprobs": [-0.1, -0.2, -0.05],
    "input_token_logprobs": [
        [[-0.1, 1, None]],
        [[-0.1, 1, None], [-0.3, 2, None]],
        [[-0.4, 3, None], [-0.25, 4, None], [-0.1, 5, None], [-0.01, 6, None],
         [-0.01, 7, None], [-0.01, 8, None], [-0.01, 9, None], [-0.01, 2, None]],
    ],
    "output_token_logprobs": [[[-0.1, 10, None]]] * 3,
    "unconditional_token_logprobs": [
        [[None, 1, None]],
        [[None, 1, None], [-1.4, 2, None]],
        [[None, 3, None], [-0.25, 4, None], [-0.1, 5, None], [-0.01, 6, None],
         [-0.01, 7, None], [-0.01, 8, None], [-0.01, 9, None], [-0.01, 2, None]],
    ],
}


def test_token_length_normalized_picks_the_best_mean():
    assert token_length_normalized(**MOCK).decision == "antidisestablishmentarianism"


def test_greedy_token_selection_pads_short_rows_with_their_mean():
    decision = greedy_token_selection(**MOCK)
    assert decision.decision == "organ"
    expected = [[-0.1] * 8, [-0.1, -0.3] + [-0.2] * 6,
                [-0.4, -0.25, -0.1, -0.01, -0.01, -0.01, -0.01, -0.01]]
    for row, want in zip(decision.meta_info["greedy_logprob_matrix"], expected):
        assert row == pytest.approx(want, abs=1e-9)


def test_unconditional_likelihood_normalized():
    decision = unconditional_likelihood_normalized(**MOCK)
    assert decision.decision == "organism"
    assert decision.meta_info["normalized_unconditional_prompt_logprobs"] == pytest.approx(
        [-0.1, 0.5, -0.05], abs=1e-9)
    assert unconditional_likelihood_normalized.requires_unconditional_logprobs
    assert not token_length_normalized.requires_unconditional_logprobs


def test_total_logprob_prefers_the_most_probable_sequence():
    decision = total_logprob(**MOCK)
    assert decision.decision == "organ"
    assert decision.meta_info["total_logprobs"] == pytest.approx([-0.1, -0.4, -0.8])


@pytest.mark.parametrize("method", [token_length_normalized, greedy_token_selection,
                                    total_logprob])
def test_ties_go_to_the_earliest_choice(method):
    entries = [[[-0.5, 1, None]], [[-0.5, 2, None]]]
    decision = method(choices=["a", "b"], normalized_prompt_logprobs=[-0.5, -0.5],
                      input_token_logprobs=entries, output_token_logprobs=[[], []])
    assert decision.decision == "a"


@pytest.mark.parametrize("method", [token_length_normalized, greedy_token_selection,
                                    unconditional_likelihood_normalized, total_logprob])
def test_every_method_returns_the_common_meta_info(method):
    meta = method(**MOCK).meta_info
    assert meta["normalized_prompt_logprobs"] == MOCK["normalized_prompt_logprobs"]
    assert meta["input_token_logprobs"] is MOCK["input_token_logprobs"]
    assert "output_token_logprobs" in meta


def test_unconditional_needs_its_logprobs_and_matching_lengths():
    args = {k: v for k, v in MOCK.items() if k != "unconditional_token_logprobs"}
    with pytest.raises(ValueError, match="unconditional_token_logprobs"):
        unconditional_likelihood_normalized(**args)
    short = dict(MOCK, unconditional_token_logprobs=[[[None, 1, None]]] * 3)
    with pytest.raises(ValueError, match="same tokens"):
        unconditional_likelihood_normalized(**short)


def test_mean_logprob_skips_only_null_entries():
    assert mean_logprob([[None, 1, None], [-1.0, 2, None], [0.0, 3, None]]) == -0.5
    assert mean_logprob([[None, 1, None]]) == -math.inf
