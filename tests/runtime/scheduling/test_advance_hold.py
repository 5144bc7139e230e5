"""The scheduler's token advances after a forward run with the compiler's worker held off the
GIL (GrammarManager.advancing): every advance of a step sees the hold in force, an advance
that may build automaton rows (--grammar-advance-inline) lends the worker the GIL first (it
may be parked holding the grammar's lock), nothing is left held after a step, and the tokens
are the reference run's either way."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from stepping import free, matches_reference, not_ready_at_first

from radixlm.runtime.scheduling.grammar_manager import GrammarManager


def watch_holds(s, seen: list[tuple[str, bool]]) -> None:  # noqa: ANN001
    """Record, at each token's advance and at each grammar step made inside one, whether
    the worker is held off the GIL."""
    manager: GrammarManager = s.grammar
    held = lambda: manager.compiler.background.held  # noqa: E731
    after_token, advance = manager.after_token, manager._advance

    def watched_after_token(req, token):  # noqa: ANN001, ANN202
        seen.append(("after_token", held()))
        return after_token(req, token)

    def watched_advance(req, token):  # noqa: ANN001, ANN202
        seen.append(("advance", held()))
        return advance(req, token)

    manager.after_token = watched_after_token
    manager._advance = watched_advance


def test_a_steps_advances_run_with_the_worker_held(make_scheduler) -> None:  # noqa: ANN001
    s = make_scheduler(grammar_mask_wait_ms=0)
    seen: list[tuple[str, bool]] = []
    watch_holds(s, seen)
    s.add_request(free())
    matches_reference(make_scheduler, s)
    tokens = [h for what, h in seen if what == "after_token"]
    assert tokens and all(tokens), "each sampled token's advance: the worker held"
    assert not s.grammar.compiler.background.held, "no hold left behind after the steps"


@pytest.mark.parametrize("inline", [False, True], ids=["deferred", "inline"])
def test_an_advance_that_builds_rows_lends_the_worker_the_gil(make_scheduler, inline) -> None:  # noqa: ANN001
    s = make_scheduler(grammar_mask_wait_ms=0, grammar_advance_inline=inline)
    not_ready_at_first(s, "advance_ready", 2)
    seen: list[tuple[str, bool]] = []
    watch_holds(s, seen)
    info = matches_reference(make_scheduler, s)
    advances = [h for what, h in seen if what == "advance"]
    if inline:  # made when the token comes, not ready: the hold lifted meanwhile
        assert info["grammar_advances_deferred"] == 0 and not all(advances)
    else:  # made only once ready: at the gate (its hold) or after the forward (advancing's)
        assert info["grammar_advances_deferred"] > 0 and all(advances)
    assert not s.grammar.compiler.background.held


def test_prefetches_inside_the_advances_wake_the_worker_after_them(make_scheduler) -> None:  # noqa: ANN001
    s = make_scheduler(grammar_mask_wait_ms=0)
    compiler = s.grammar.compiler
    inside, woken = [False], []
    submit, held_quietly = compiler._submit, compiler.held_quietly

    @contextmanager
    def watched_block():  # noqa: ANN202
        with held_quietly():
            inside[0] = True
            try:
                yield
            finally:
                inside[0] = False

    def watched_submit(fn, *args):  # noqa: ANN001, ANN002, ANN202
        woken.append(inside[0])
        return submit(fn, *args)

    compiler.held_quietly, compiler._submit = watched_block, watched_submit
    matches_reference(make_scheduler, s)
    assert woken and not any(woken), "the worker woken for prefetches, never inside the block"
