"""The lookup-draft budget: within [0, most]; the longest chain while drafts are accepted; no
drafts while they are rejected, with probes after pauses that double up to a bound and reset
when a probe is accepted; never silent for longer than the longest pause."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.speculative.draft_budget import (
    FIRST_WAIT,
    MAX_WAIT,
    PROBE,
    DraftBudget,
    best_length,
    expected_tokens,
    step_cost,
)

# per step: whether the chain finds drafts, and the fraction of them the model accepts
STEPS = st.lists(st.tuples(st.booleans(), st.floats(0.0, 1.0)), max_size=80)


def drive(budget: DraftBudget, steps: list[tuple[bool, float]]) -> list[int]:
    """Run ``steps`` (found drafts?, accepted fraction); the budget taken at each step."""
    taken = []
    for found, share in steps:
        k = budget.take()
        taken.append(k)
        if found and k:
            budget.update(k, int(share * k))
    return taken


@given(st.integers(0, 12), STEPS, st.floats(0.0, 1.0))
def test_budget_stays_within_bounds_and_never_goes_silent(most, steps, prior):
    b = DraftBudget(most, prior)
    taken = drive(b, steps)
    assert all(0 <= k <= most for k in taken)
    assert 0.0 <= b.rate <= 1.0
    assert 0 <= b.wait <= MAX_WAIT and FIRST_WAIT <= b.pause <= MAX_WAIT
    if most:  # within the longest pause a probe comes, whatever came before
        assert any(b.take() for _ in range(MAX_WAIT + 1))


@given(st.integers(1, 12), STEPS)
def test_accepted_chains_bring_the_longest_budget_back(most, steps):
    b = DraftBudget(most)
    drive(b, steps)
    for _ in range(MAX_WAIT + 1):  # the pause ends, the probe is accepted
        if k := b.take():
            b.update(k, k)
            break
    for _ in range(8):
        k = b.take()
        b.update(k, k)
    assert b.take() == most


def test_rejections_pause_drafting_and_the_pause_doubles_per_failed_probe():
    b = DraftBudget(8)
    assert b.take() > 0, "the prior (a rate of 1/2) drafts"
    while b.take():
        b.update(8, 0)
    waits = []
    for _ in range(5):
        silent = 0
        while not (k := b.take()):
            silent += 1
        assert k == PROBE
        b.update(k, 0)
        waits.append(silent)
    # the first pause may be partly spent before the loop saw it; then each doubles
    assert waits[1:] == [min(FIRST_WAIT * 2**i, MAX_WAIT) for i in range(1, 5)]
    silent = 0
    while not (k := b.take()):
        silent += 1
    b.update(k, k)  # an accepted probe: drafting goes on, the next pause is short again
    assert b.take() > 0
    assert b.pause == FIRST_WAIT


def test_no_drafts_no_information():
    b = DraftBudget(6)
    rate, now = b.rate, b.now
    b.update(0, 0)
    assert (b.rate, b.now) == (rate, now)


def test_the_length_follows_the_rate_and_the_cost():
    assert best_length(0.0, 8) == 0, "drafts never accepted are not worth their cost"
    assert best_length(0.99, 8) == 8
    assert best_length(0.6, 8) <= best_length(0.8, 8) <= best_length(0.95, 8)
    assert expected_tokens(0.5, 2) == 1.75 and step_cost(0) == 1.0 < step_cost(1)


def test_a_higher_prior_drafts_longer_chains_from_the_start():
    assert DraftBudget(8, prior=0.8).take() == 8
    assert 0 < DraftBudget(8).take() < 8
    low = DraftBudget(8, prior=0.0)
    assert low.take() == 0, "a prior that drafts nothing pauses first"
    assert any(low.take() for _ in range(MAX_WAIT + 1)), "then probes"
