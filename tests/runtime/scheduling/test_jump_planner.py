"""Jump-forward plans made ahead on the compiler's worker (jump_planner.JumpPlanner): a token
whose advance is deferred has the jump after it planned by the worker too, and the scheduler
only commits that plan when it makes the advance; a plan that no longer fits, or that the
worker could not make, is planned again on the scheduler's thread. The tokens are the
reference run's in every case (the plan is the same function of the same inputs).

Driven step by step in-process on the tiny Llama; deferrals are forced by reporting each
(state, token) advance not ready for its first checks (stepping.not_ready_at_first).
"""

from __future__ import annotations

import threading

import pytest
from stepping import matches_reference, not_ready_at_first

from radixlm.runtime.scheduling.jump_planner import JumpPlanner, PreparedJump


@pytest.mark.parametrize("wait_ms", [0.0, 1.0], ids=["holds", "gate waits"])
def test_deferred_jumps_are_planned_by_the_worker_and_committed(make_scheduler,
                                                                wait_ms) -> None:  # noqa: ANN001
    s = make_scheduler(grammar_mask_wait_ms=wait_ms)
    not_ready_at_first(s, "advance_ready", 2)  # every advance deferred at first
    info = matches_reference(make_scheduler, s)
    assert info["grammar_advances_deferred"] > 0
    assert info["grammar_jumps_planned_ahead"] > 0, "the worker planned the deferred jumps"
    assert 0 < info["grammar_jumps_committed"] <= info["grammar_jumps_planned_ahead"]


def test_inline_advances_plan_nothing_ahead(make_scheduler) -> None:  # noqa: ANN001
    s = make_scheduler(grammar_mask_wait_ms=0, grammar_advance_inline=True)
    not_ready_at_first(s, "advance_ready", 2)
    info = matches_reference(make_scheduler, s)
    assert info["grammar_jumps_planned_ahead"] == 0 and info["grammar_jumps_committed"] == 0


@pytest.mark.parametrize("spoil", ["stale", "failed"])
def test_a_plan_that_does_not_fit_is_made_again_with_the_same_tokens(make_scheduler,
                                                                     spoil) -> None:  # noqa: ANN001
    """``stale``: the worker's plan is for another forced text (it must not be committed);
    ``failed``: planning raised on the worker. Either way the scheduler plans it itself."""
    s = make_scheduler(grammar_mask_wait_ms=0)
    not_ready_at_first(s, "advance_ready", 2)
    planner: JumpPlanner = s.grammar.jumps
    prepare, plan = planner._prepare, planner._plan
    worker_plans = [0]

    def spoiled_plan(segment, forced):  # noqa: ANN001, ANN202
        if threading.current_thread() is not threading.main_thread():
            worker_plans[0] += 1
            if spoil == "failed":
                raise RuntimeError("planning bug")
        return plan(segment, forced)

    def spoiled_prepare(prepared: PreparedJump) -> None:
        # the plan reads as made only once it is spoiled: the real ``_prepare`` sets ``done``
        # itself, and the scheduler could commit in between (it did once, in CI)
        done, prepared.done = prepared.done, threading.Event()
        try:
            prepare(prepared)
            if spoil == "stale":
                prepared.forced += "!"
        finally:
            prepared.done = done
            done.set()

    planner._plan, planner._prepare = spoiled_plan, spoiled_prepare
    info = matches_reference(make_scheduler, s)
    assert worker_plans[0] > 0 and info["grammar_advances_deferred"] > 0
    assert info["grammar_jumps_committed"] == 0, "no spoiled plan committed"


def test_a_prepared_plan_fits_only_its_own_forced_text_and_output() -> None:
    prepared = PreparedJump.made([5, 6], '", "', None)
    assert prepared.fits('", "', [5, 6])
    assert not prepared.fits('", "', [5, 7]) and not prepared.fits('"', [5, 6])
    pending = PreparedJump(None, 3, [5, 6])
    assert not pending.fits("", [5, 6]), "not made yet"
