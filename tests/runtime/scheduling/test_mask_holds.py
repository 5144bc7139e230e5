"""Holding a constrained request out of a step while its mask is not ready (mask_gate.py).

Driven step by step in-process on the tiny Llama. A "slow mask" is made deterministic by
making the compiled grammar report each state's mask as not ready for its first few checks
(the grammar is the scheduler's own, fetched from its compiler's cache by the same spec), and
``grammar_mask_wait_ms=0`` so the gate never waits: every such check holds the request.
"""

from __future__ import annotations

import json
from collections import Counter

import jsonschema
import pytest
from stepping import (
    SCHEMA,
    constrained,
    free,
    matches_reference,
    not_ready_at_first,
    reference,
    run,
)

from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import FinishStop


def slow_masks(s: Scheduler, not_ready_checks: int) -> Counter:
    """Every state's mask reported not ready for its first ``not_ready_checks`` checks."""
    return not_ready_at_first(s, "mask_ready", not_ready_checks)


@pytest.mark.parametrize("jump", [True, False], ids=["jump-forward", "no jump-forward"])
@pytest.mark.parametrize("forced", [True, False], ids=["forced holds", "real cold masks"])
def test_held_requests_produce_exactly_the_tokens_they_would_have(make_scheduler, jump,
                                                                  forced):
    args = {"disable_jump_forward": not jump}
    s = make_scheduler(grammar_mask_wait_ms=0, **args)  # never wait: hold whatever is cold
    if forced:
        slow_masks(s, not_ready_checks=3)
    info = matches_reference(make_scheduler, s, **args)
    if forced:
        assert info["mask_held_steps"] > 0 and info["mask_holds"] > 0
        assert info["mask_max_hold_steps"] >= 1
    assert info["mask_holds"] <= info["mask_held_steps"]
    # each token the grammar accepted was timed on the scheduler's thread (jump-forward
    # tokens come in a plan, not one by one: at most the output's length), and a deferred
    # advance's check once more
    assert 0 < info["grammar_advances"] <= info["output_tokens"] + \
        info["grammar_advances_deferred"]
    assert 0 < info["grammar_advance_ms_p50"] <= info["grammar_advance_ms_p99"] \
        <= info["grammar_advance_ms_max"]
    # a step's grammar time is its mask time plus its advances' (the run fits the window)
    assert info["grammar_steps"] >= info["mask_wait_steps"]
    assert 0 < info["grammar_step_ms_p50"] <= info["grammar_step_ms_p99"] \
        <= info["grammar_step_ms_max"]
    assert info["grammar_step_ms_max"] >= info["mask_wait_ms_max"]
    assert info["grammar_step_ms_max"] >= info["grammar_advance_ms_max"]


def test_other_requests_progress_while_one_is_held(make_scheduler):
    s = make_scheduler(grammar_mask_wait_ms=0)
    slow_masks(s, not_ready_checks=6)  # each state: held ~3 steps (prefetch checks count too)
    s.add_request(constrained())
    s.add_request(free())
    seen: dict[int, tuple[int, int]] = {0: (0, 0)}  # step -> (free's tokens, held so far)

    def record(n: int, ids: dict[str, list[int]]) -> None:
        req = s.reqs.get("free")
        seen[n] = (req.num_output if req is not None else 20, s.grammar.mask_waits.held_steps)

    ids, reasons = run(s, on_step=record)
    done_free = min(n for n, (tokens, _) in seen.items() if tokens == 20)
    assert [seen[n][0] for n in range(1, done_free + 1)] == list(range(1, 21)), \
        "the free request gained a token in every step, the held one's included"
    assert seen[done_free][1] > 0, "the constrained request was held meanwhile"
    assert isinstance(reasons["json"], FinishStop), "and it finished afterwards"
    jsonschema.validate(json.loads(s.tokenizer.decode(ids["json"])), SCHEMA)


def test_steps_with_only_held_requests_sleep_instead_of_running(make_scheduler):
    s = make_scheduler(grammar_mask_wait_ms=0)
    slow_masks(s, not_ready_checks=4)
    s.add_request(constrained())
    ids, reasons = run(s)
    assert isinstance(reasons["json"], FinishStop)
    info = s.info()
    assert info["mask_held_steps"] > 0
    # steps that only checked masks (all held) ran no forward but count as mask waits
    assert info["mask_wait_steps"] > info["steps"]
    assert info["mask_idle_wait_ms"] > 0.0, "they slept for the mask, not spun"


def test_the_compilers_worker_is_held_off_the_gil_in_the_gate_only(make_scheduler):
    """Every mask the scheduler's gate copies is copied with the worker's hold in force (the
    worker parks at its pause points), and no step leaves it held: compiles, warm-up and
    prefetch run between the gates, during the forwards. The output is the reference."""
    expected = reference(make_scheduler)
    s = make_scheduler(grammar_mask_wait_ms=1.0)
    background = s.grammar.compiler.background
    held_at_copies: list[bool] = []
    begin_step = s.grammar.begin_step

    def observed_begin_step():  # noqa: ANN202
        gate = begin_step()
        fill = gate.fill

        def observed_fill(req) -> None:  # noqa: ANN001
            held_at_copies.append(background.held)
            fill(req)

        gate.fill = observed_fill
        return gate

    s.grammar.begin_step = observed_begin_step
    s.add_request(constrained())

    def not_held_between_steps(n: int, ids: dict[str, list[int]]) -> None:
        assert not background.held, f"step {n} left the worker held"

    ids, _ = run(s, on_step=not_held_between_steps)
    assert ids["json"] == expected
    assert held_at_copies and all(held_at_copies), "the gate's copies ran held"
    assert s.info()["grammar_worker_pauses"] == background.pauses


@pytest.mark.parametrize("value", [-1.0, float("nan"), 1e9])
def test_the_mask_wait_bound_is_validated(value):
    from radixlm.runtime.server_args import ServerArgs

    with pytest.raises(ValueError, match="grammar_mask_wait_ms must be in"):
        ServerArgs(model_path="m", grammar_mask_wait_ms=value)
