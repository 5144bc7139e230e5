"""A token's grammar advance deferred to the compiler's worker when it would build automaton
rows on the scheduler's thread (token_advance.AdvanceDeferred): the request is held until
the advance is ready, then it is made (a jump-forward applied, a finish set) before the
gate, and the output is exactly the one an undeferred run gives.

Driven step by step in-process on the tiny Llama. Deferrals are made deterministic by making
the scheduler's compiled grammar report each (state, token) advance as not ready for its
first few checks (the advances themselves are unchanged).
"""

from __future__ import annotations

from collections import Counter

import pytest
from stepping import constrained, free, matches_reference, not_ready_at_first, run

from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import FinishStop


def slow_advances(s: Scheduler, not_ready_checks: int) -> Counter:
    """Every (state, token) advance reported not ready for its first ``not_ready_checks``
    checks."""
    return not_ready_at_first(s, "advance_ready", not_ready_checks)


# The bound on grammar work on the scheduler's thread, at its two ends: 0 (an advance that
# would build rows is deferred, the default) and infinite (--grammar-advance-inline).
BOUNDS = pytest.mark.parametrize("inline", [False, True], ids=["deferred", "inline"])


@BOUNDS
@pytest.mark.parametrize("wait_ms", [0.0, 1.0], ids=["holds", "gate waits"])
@pytest.mark.parametrize("jump", [True, False], ids=["jump-forward", "no jump-forward"])
def test_deferred_advances_produce_exactly_the_tokens_they_would_have(make_scheduler, jump,
                                                                      wait_ms, inline):
    args = {"disable_jump_forward": not jump}
    s = make_scheduler(grammar_mask_wait_ms=wait_ms, grammar_advance_inline=inline, **args)
    checks = slow_advances(s, not_ready_checks=2)
    info = matches_reference(make_scheduler, s, **args)  # the reference runs the default
    if inline:  # every advance made when its token is accepted, ready or not
        assert info["grammar_advances_deferred"] == 0 and info["grammar_advances"] > 0
        return
    assert info["grammar_advances_deferred"] > 0 and checks
    assert info["grammar_advances"] >= info["grammar_advances_deferred"]
    if wait_ms == 0.0:  # nothing waits: each deferral holds the request at least a step
        assert info["mask_held_steps"] >= info["grammar_advances_deferred"]
    assert all(r.grammar_pending is None for r in s.running), "none left pending"


@BOUNDS
def test_real_deferrals_never_change_the_output(make_scheduler, inline):
    """Without forcing: whatever the worker has not built when a token is accepted is
    deferred (timing decides which), or made at once when inline, and the tokens are the
    reference's either way."""
    s = make_scheduler(grammar_mask_wait_ms=0, grammar_advance_inline=inline)
    info = matches_reference(make_scheduler, s)
    if inline:
        assert info["grammar_advances_deferred"] == 0


def test_other_requests_progress_while_one_advance_is_deferred(make_scheduler):
    s = make_scheduler(grammar_mask_wait_ms=0)
    slow_advances(s, not_ready_checks=4)
    s.add_request(constrained())
    s.add_request(free())
    tokens: dict[int, int] = {0: 0}  # step -> the free request's tokens

    def record(n: int, ids: dict[str, list[int]]) -> None:
        req = s.reqs.get("free")
        tokens[n] = req.num_output if req is not None else 20

    ids, reasons = run(s, on_step=record)
    done = min(n for n, t in tokens.items() if t == 20)
    assert [tokens[n] for n in range(1, done + 1)] == list(range(1, 21)), \
        "the free request gained a token in every step"
    assert s.info()["grammar_advances_deferred"] > 0
    assert isinstance(reasons["json"], FinishStop)


def test_a_deferred_advance_that_raises_fails_its_request_alone(make_scheduler):
    s = make_scheduler(grammar_mask_wait_ms=0)
    slow_advances(s, not_ready_checks=1)

    def broken(req):  # noqa: ANN001, ANN202
        raise RuntimeError("resume bug")

    s.output.resume_grammar = broken
    s.add_request(constrained())
    s.add_request(free())
    ids, reasons = run(s)
    assert [e.rid for e in s.errors] == ["json"]
    assert s.errors[0].code == "internal" and "advancing the constraint" in s.errors[0].message
    assert "resume bug" in s.errors[0].message
    assert len(ids["free"]) == 20, "the batch-mate finished"
    assert "json" not in s.reqs and not s.running and not s.waiting


def test_the_inline_setting_has_a_flag_and_is_validated():
    import argparse

    from radixlm.runtime.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)

    def parse(*flags: str) -> ServerArgs:
        return ServerArgs.from_cli_args(parser.parse_args(["--model-path", "m", *flags]))

    assert parse().grammar_advance_inline is False, "deferring is the default"
    assert parse("--grammar-advance-inline").grammar_advance_inline is True
    with pytest.raises(ValueError, match="grammar_advance_inline must be True or False"):
        ServerArgs(model_path="m", grammar_advance_inline="no")


@BOUNDS
@pytest.mark.parametrize("wait_ms", [0.0, 1.0], ids=["holds", "gate waits"])
def test_a_jumps_budget_check_that_would_search_is_deferred_with_the_same_tokens(
        make_scheduler, wait_ms, inline):  # noqa: ANN001
    """A request that closes its output within max_new_tokens checks that a jump-forward
    leaves room to close: the closing distance of the state the jump ends at. One not
    computed yet (a search under the grammar's lock) defers the whole advance to the worker
    (undone, made again once the distance is there); inline, it is searched at once."""
    s = make_scheduler(grammar_mask_wait_ms=wait_ms, grammar_advance_inline=inline)
    checks = not_ready_at_first(s, "closing_dist_ready", 2)
    info = matches_reference(make_scheduler, s)
    if inline:  # searched when needed: never asked whether the distance is there
        assert info["grammar_advances_deferred"] == 0 and not checks
    else:
        assert checks, "the request planned jumps whose budget it checked"
        assert info["grammar_advances_deferred"] > 0
    assert all(r.grammar_pending is None for r in s.running)
