"""The draft row's price: the fit of step time against rows recovers ``fixed + per_row * rows``
and prices a row higher as the batch grows; the prior holds until the rows differ; the budget
drafts less (and stops probing) as a row gets dearer."""

from __future__ import annotations

import pytest

from radixlm.runtime.speculative.draft_budget import MAX_WAIT, DraftBudget, best_length
from radixlm.runtime.speculative.step_cost import (
    MAX_FIXED_ROWS,
    PRIOR_FIXED_ROWS,
    StepCostModel,
)


def test_the_fit_recovers_the_fixed_part_in_rows():
    m = StepCostModel()
    for rows in [1, 9, 4, 1, 3, 8, 2, 1, 6] * 5:
        m.observe(rows, 0.012 + 0.003 * rows)  # fixed 12 ms, 3 ms a row: F = 4
    assert m.fixed_rows == pytest.approx(4.0)
    assert m.row_cost(1) == pytest.approx(0.2)
    assert m.row_cost(8) == pytest.approx(8 / 12)
    assert m.row_cost(1) < m.row_cost(8) < 1.0


def test_the_prior_holds_until_the_rows_differ():
    m = StepCostModel()
    assert m.fixed_rows == PRIOR_FIXED_ROWS
    for _ in range(20):
        m.observe(1, 0.02)  # every step one row: nothing to fit
    assert m.fixed_rows == PRIOR_FIXED_ROWS
    m.observe(0, 0.02)  # ignored
    m.observe(5, 0.0)
    assert m.fixed_rows == PRIOR_FIXED_ROWS


def test_rows_that_cost_nothing_make_drafts_cheap():
    m = StepCostModel()
    for rows in [1, 9] * 10:
        m.observe(rows, 0.05)
    assert m.fixed_rows == MAX_FIXED_ROWS
    assert m.row_cost(1) < 0.01


def test_a_dearer_row_means_shorter_chains_then_none():
    assert best_length(0.8, 8, 0.01) == 8
    assert 0 < best_length(0.8, 8, 0.24) < 8
    assert best_length(0.8, 8, 0.7) == 0  # batch 8 on SmolLM2's blocks: only near-sure copies
    assert best_length(0.95, 8, 0.7) > 0


def test_no_probes_where_even_a_copy_would_not_pay():
    b = DraftBudget(8, prior=0.5)
    taken = [b.take(0.7) for _ in range(4 * MAX_WAIT)]
    assert not any(taken)
    # the batch shrinks, rows get cheap: the probe comes within the longest pause
    assert any(b.take(0.01) for _ in range(MAX_WAIT + 1))
