"""The lookup-draft budget: halves on a chain rejected outright, follows partial acceptance,
doubles on a whole one, within [1, most]."""

from __future__ import annotations

from radixlm.runtime.speculative.draft_budget import DraftBudget


def test_budget_adapts_within_its_bounds():
    b = DraftBudget(6)
    assert b.now == 6
    b.update(6, 0)
    b.update(3, 0)
    b.update(1, 0)
    b.update(1, 0)
    assert b.now == 1
    b.update(1, 1)
    b.update(2, 2)
    assert b.now == 4
    b.update(4, 4)
    assert b.now == 6, "capped at the most"
    b.update(6, 2)
    assert b.now == 3, "just past what was accepted"
    b.update(0, 0)
    assert b.now == 3, "no drafts: no information"
