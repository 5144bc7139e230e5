"""A quick compile never waits for a slow one: the lanes, seen through the public compiler."""

from __future__ import annotations

import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.fsm.compile.compile_lanes import CompileLanes


def _negated_triples(patterns: list[str]) -> dict:
    return {"not": {"allOf": [{"pattern": p} for p in patterns]}}


# strings outside negated conjunctions of negated pattern triples (the shape of the corpus's
# Handwritten allany15): its first mask needs hundreds of thousands of liveness steps
SLOW = {"type": "string", "minLength": 1, "maxLength": 200, "allOf": [
    {"not": {"allOf": [_negated_triples(["^....$", x, y]) for x, y in
                       (("ab1", "b12"), ("bc1", "c12"), ("ca1", "a12"))]}},
    {"not": {"allOf": [_negated_triples(["^[\\w]*$", "\\d\\d", c]) for c in
                       ("[a|b]", "[b|c]", "[c|a]")]}}]}
QUICK = GrammarSpec.regex("[a-z]{3}")  # no intersection: no liveness search, no pause point
QUICK_STEPS = 1_000  # a step budget, not seconds: SLOW passes it, QUICK never does


def test_a_quick_compile_overtakes_a_slow_one(vocab) -> None:  # noqa: ANN001
    budget = CompileBudget(background_warmup_states=0, max_seconds=1e9, max_mask_seconds=1e9,
                           max_compile_steps=None)
    compiler = GrammarCompiler(vocab, budget, compile_workers=2,
                               quick_compile_steps=QUICK_STEPS)
    slow = compiler.compile_async(GrammarSpec.json_schema(SLOW))
    assert compiler.lanes.wait_slow(1, timeout=600)  # past its quick share: slow lane
    quick = compiler.compile_async(QUICK)
    assert quick.result(timeout=600).dfa.matches(b"abc")
    # from the quick one's asking on, the slow one could not pass a pause point: still going
    assert not slow.done() and compiler.lanes.slow_running == 1
    assert slow.result(timeout=600).dfa.matches(b'"ab12"')
    assert compiler.lanes.quick_running == compiler.lanes.slow_running == 0
    compiler.shutdown()


def test_a_slow_compile_holding_every_thread_does_not_wait() -> None:
    lanes = CompileLanes(workers=1, quick_steps=0)

    class Clock:  # the one thing pause reads of a compile's clock
        steps = 1

    slow = lanes.start()
    lanes.pause(slow, Clock())  # now slow, holding the pool's only thread
    assert lanes.slow_running == 1
    queued = lanes.start()  # a quick compile queued behind it: no thread left to run it
    lanes.pause(slow, Clock())  # returns at once: waiting would wait forever
    assert lanes.yields == 0
    lanes.finish(slow)
    lanes.finish(queued)
    assert lanes.quick_running == lanes.slow_running == 0


def test_lanes_reject_a_negative_share() -> None:
    with pytest.raises(ValueError, match="quick_steps"):
        CompileLanes(workers=1, quick_steps=-1)
