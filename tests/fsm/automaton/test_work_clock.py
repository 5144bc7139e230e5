"""The fsm's time budgets run on a clock that stops while the garbage collector runs."""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator

import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec, TokenVocabulary
from radixlm.fsm.automaton import work_clock

PAUSE = 0.6  # one collection this long: past the 0.5 s mask time bound below on its own


@pytest.fixture
def stall() -> Iterator[list[bool]]:
    """Set ``[0]`` to True and the next collection takes PAUSE seconds longer."""
    armed = [False]

    def callback(phase: str, info: dict) -> None:
        if phase == "start" and armed[0]:
            armed[0] = False
            time.sleep(PAUSE)

    gc.callbacks.append(callback)  # after work_clock's hook: inside the collection it times
    try:
        yield armed
    finally:
        gc.callbacks.remove(callback)


def test_collections_are_counted() -> None:
    before = work_clock.gc_seconds()
    gc.collect()
    assert work_clock.gc_seconds() > before


def test_a_mask_is_not_charged_a_garbage_collection(vocab: TokenVocabulary,
                                                    stall: list[bool]) -> None:
    budget = CompileBudget(warmup_states=0, background_warmup_states=0, max_mask_seconds=0.5)
    assert budget.max_mask_seconds < PAUSE
    compiler = GrammarCompiler(vocab, budget)
    grammar = compiler.compile(GrammarSpec.json_schema(
        {"type": "object", "properties": {"a": {"type": "string"}}}))
    dfa, build_row, rows = grammar.dfa, grammar.dfa.build_row, []

    def build_row_then_collect(state: int) -> None:  # a collection inside the mask's walk
        build_row(state)
        rows.append(state)
        if len(rows) == 1:
            stall[0] = True
            gc.collect()

    dfa.build_row = build_row_then_collect
    before = work_clock.gc_seconds()
    grammar.mask(grammar.initial_state)  # would raise "mask time" on the wall clock
    assert rows and work_clock.gc_seconds() - before >= PAUSE
    compiler.shutdown()
