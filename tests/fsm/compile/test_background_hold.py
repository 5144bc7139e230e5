"""The compiler's worker parks while a caller holds it off the GIL (BackgroundHold): at its
pause points, in background warm-up, prefetch and compiles alike; it resumes where it parked,
with the same masks, and the parked time is off its budgets. Observed through events (parks
counted, futures, masks ready), never through timing."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

from radixlm.fsm import BackgroundHold, CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.fsm.automaton import work_clock

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "tags": {"type": "array", "items": {
        "enum": ["alpha", "beta", "gamma"]}}, "n": {"type": "integer", "minimum": 3}},
    "required": ["name"]}
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)
WARM = CompileBudget(warmup_states=0, background_warmup_states=40)
NEVER = 600.0  # seconds: a park the tests end themselves (no safety cap reached)
PATIENCE = 120.0  # seconds a test waits for the worker before failing (a hang, not a timing)


def test_a_point_passes_unless_held_and_holds_nest() -> None:
    hold = BackgroundHold()
    hold.point()
    assert not hold.held and hold.pauses == 0
    hold.hold()
    hold.hold()
    hold.release()
    assert hold.held, "one of two holds still in force"
    hold.release()
    assert not hold.held
    with pytest.raises(RuntimeError, match="without a hold"):
        hold.release()
    with pytest.raises(ValueError, match="max_pause_seconds"):
        BackgroundHold(0.0)


def test_a_parked_thread_resumes_on_release_and_its_park_is_off_its_work_clock() -> None:
    hold, seen = BackgroundHold(NEVER), {}

    def worker() -> None:
        wall, work = time.perf_counter(), work_clock.now()
        hold.point()
        seen["wall"], seen["work"] = time.perf_counter() - wall, work_clock.now() - work

    with hold.holding():
        thread = threading.Thread(target=worker)
        thread.start()
        assert hold.wait_parked(PATIENCE)
        assert thread.is_alive() and not seen
    thread.join(PATIENCE)
    assert hold.pauses == 1 and hold.parked_now == 0 and hold.paused_seconds > 0
    # the park's own wake-up runs inside its timed window on the thread's CPU clock (19 ns
    # once under load): allow that much, far below the park itself, which the work clock
    # would otherwise count in full
    wake_up = min(1e-4, hold.paused_seconds / 10)
    assert seen["wall"] - seen["work"] >= hold.paused_seconds - wake_up, "parked: not work"


def test_background_warm_up_parks_while_held_and_finishes_the_same_masks(vocab) -> None:  # noqa: ANN001
    """Held and released over and over while the worker warms up (wherever it is then:
    between masks or inside one): while parked nothing is computed; the masks it ends with
    are those of a grammar warmed up in one go."""
    compiler = GrammarCompiler(vocab, WARM, max_background_pause=NEVER)
    hold = compiler.background
    hold.hold()  # before the compile: its background warm-up starts held
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))  # inline: never parked
    before = len(grammar.cached_masks)
    assert hold.wait_parked(PATIENCE)
    assert len(grammar.cached_masks) == before, "parked before computing any mask"
    cycles = 0
    while True:
        hold.release()
        hold.hold()
        parks = hold.pauses + 1
        while not hold.wait_parked(0.05, parks):  # (a poll, not a timing: it waits again)
            if grammar.stats.warmup_states >= 40 or not grammar.warm_up_pending:
                break
        else:
            cycles += 1
            continue
        break
    hold.release()
    compiler.shutdown()
    assert cycles >= 3 and hold.pauses >= cycles
    reference = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    for state, mask in list(grammar.cached_masks.items()):
        path = _path_to(grammar, state)
        ref_state = reference.dfa.walk(reference.initial_state, path)
        assert np.array_equal(mask.numpy(), reference.mask(ref_state).numpy())


def test_the_mask_a_holder_sleeps_for_is_computed_while_it_lends_the_gil(vocab) -> None:  # noqa: ANN001
    """The gate's pattern: held, a prefetched mask waits (the worker is parked); the holder
    releases while it sleeps for the mask, gets it, and holds again."""
    compiler = GrammarCompiler(vocab, COLD, max_background_pause=NEVER)
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    hold = compiler.background
    hold.hold()
    assert compiler.prefetch(matcher) is False
    assert hold.wait_parked(PATIENCE)
    assert not matcher.mask_ready(), "parked: the prefetched mask waits"
    hold.release()
    assert matcher.wait_mask_ready(PATIENCE)
    hold.hold()
    hold.release()
    compiler.shutdown()


def test_a_compile_parks_while_held_and_its_budget_does_not_count_the_park(vocab) -> None:  # noqa: ANN001
    budget = CompileBudget(max_seconds=1.0, warmup_states=2, background_warmup_states=0)
    compiler = GrammarCompiler(vocab, budget, max_background_pause=NEVER)
    hold = compiler.background
    with hold.holding():
        future = compiler.compile_async(GrammarSpec.json_schema(SCHEMA))
        assert hold.wait_parked(PATIENCE)
        assert not future.done()
        time.sleep(1.2)  # parked past the whole compile budget (not work: not charged)
        assert not future.done()
    grammar = future.result(PATIENCE)
    assert grammar.initial_state is not None
    compiler.shutdown()


def _path_to(grammar, state: int) -> bytes:  # noqa: ANN001
    """Some byte path from the start to ``state`` (breadth first over the automaton)."""
    paths, queue = {grammar.initial_state: b""}, [grammar.initial_state]
    while queue and state not in paths:
        nxt = []
        for s in queue:
            row = grammar.dfa.row(s)
            for byte in np.flatnonzero(row).tolist():
                t = int(row[byte])
                if t not in paths:
                    paths[t] = paths[s] + bytes([byte])
                    nxt.append(t)
        queue = nxt
    return paths[state]
