"""A compile's verdict counts work steps: the same on any machine, under any load."""

from __future__ import annotations

import pytest

from radixlm.fsm import CompileBudget, GrammarBudgetError, GrammarCompiler, GrammarSpec
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.compile.compile_clock import EXTRA_TERM_STEPS, CompileClock

# a pattern intersected with lengths: its start needs liveness searches
SCHEMA = {"type": "object", "properties": {
    "k": {"type": "string", "pattern": "^(ab|ba)+c?$", "minLength": 5, "maxLength": 9}},
    "required": ["k"]}
UNTIMED = dict(background_warmup_states=0, max_seconds=1e9, max_mask_seconds=1e9)


def _compile(vocab, **budget):  # noqa: ANN001, ANN003, ANN202
    compiler = GrammarCompiler(vocab, CompileBudget(**{**UNTIMED, **budget}))
    compiler.wait_started()
    try:
        return compiler.compile(GrammarSpec.json_schema(SCHEMA))
    finally:
        compiler.shutdown()


def test_the_step_budget_refuses_by_name_the_same_way_twice(vocab) -> None:  # noqa: ANN001
    for _ in range(2):
        with pytest.raises(GrammarBudgetError, match="compile steps.*max_compile_steps"):
            _compile(vocab, max_compile_steps=20)
    assert _compile(vocab, max_compile_steps=None).dfa.matches(b'{"k":"ababc"}')


def test_the_warm_up_is_counted_in_steps_not_seconds(vocab) -> None:  # noqa: ANN001
    # how many masks the compile's warm-up computes (each can refuse the compile) is the
    # same on every run: a step allowance, not the clock
    runs = [_compile(vocab, warmup_states=8, warmup_seconds=0.02) for _ in range(2)]
    counts = [(g.stats.warmup_states, g.dfa.builder.work_steps) for g in runs]
    assert counts[0] == counts[1]
    assert 1 <= counts[0][0] <= 8


def test_a_default_budget_bounds_the_compile_in_steps() -> None:
    assert CompileBudget().max_compile_steps is not None
    with pytest.raises(ValueError, match="max_compile_steps"):
        CompileBudget(max_compile_steps=0)


def test_a_compile_charges_extra_steps_per_term_created() -> None:
    builder = TermBuilder()
    clock = CompileClock(max_steps=None, max_seconds=60.0)
    clock.track(builder)
    steps, terms = builder.work_steps, builder.num_terms
    builder.cat(builder.byte_set(1), builder.byte_set(2))  # three new terms
    assert builder.num_terms - terms == 3
    assert clock.steps == builder.work_steps - steps + 3 * EXTRA_TERM_STEPS
    assert EXTRA_TERM_STEPS > 0


def test_a_refused_compile_is_cached_without_its_frames(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(**{**UNTIMED, "max_compile_steps": 20}))
    compiler.wait_started()
    try:
        error = compiler.compile_async(GrammarSpec.json_schema(SCHEMA)).exception()
        assert isinstance(error, GrammarBudgetError)
        # the frames held the refused automaton alive as long as the cache kept the error
        assert error.__traceback__ is None
    finally:
        compiler.shutdown()
