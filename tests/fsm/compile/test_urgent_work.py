"""Look-ahead gives way to the work decoding waits for (compile/urgent_work.py, warm_up.py):
a prefetched state's mask first, then a queued job (a jump-forward plan), then the masks of
the states one token on; the masks are the same whatever the order."""

from __future__ import annotations

import threading

import numpy as np
from cold_grammar import COLD, SCHEMA, token_of

from radixlm.fsm import GrammarCompiler, GrammarSpec
from radixlm.fsm.compile.urgent_work import UrgentWork


class _Grammar:
    def __init__(self, urgent_pending: bool) -> None:
        self.urgent_pending = urgent_pending


def test_urgent_work_counts_queued_calls_and_slices_with_urgent_work() -> None:
    work = UrgentWork()
    assert not work.waiting()
    work.call_queued()
    assert work.waiting()
    work.call_started()
    assert not work.waiting()
    idle, busy = _Grammar(False), _Grammar(False)
    work.slice_queued(idle)
    work.slice_queued(busy)
    assert not work.waiting(), "a slice with only look-ahead left is not urgent"
    busy.urgent_pending = True  # a prefetch arrived for it after its slice was queued
    assert work.waiting()
    work.slice_started(busy)
    assert not work.waiting()


def test_look_ahead_stops_for_urgent_work_and_resumes_after(vocab) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    state = grammar.initial_state
    grammar.prefetch(state)
    assert grammar.urgent_pending
    grammar.warm_up(1, float("inf"), prefetched_only=True, urgent=lambda: True)
    assert grammar.mask_ready(state), "the prefetched state is urgent work itself"
    assert grammar.prefetch_pending and not grammar.urgent_pending  # look-ahead queued
    masks = grammar.index.num_masks
    assert grammar.warm_up(8, float("inf"), prefetched_only=True, urgent=lambda: True) == {}
    assert grammar.index.num_masks == masks, "no look-ahead while urgent work waits"
    grammar.warm_up(256, float("inf"), prefetched_only=True, urgent=lambda: False)
    assert not grammar.prefetch_pending
    successors, _ = grammar.index.successors(state)
    assert all(grammar.mask_ready(s) for s in successors.tolist())


def test_a_queued_job_runs_before_the_look_ahead_of_a_prefetch(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, COLD)
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    seen: dict[str, bool] = {}
    ran = threading.Event()

    def job() -> None:  # e.g. the scheduler's jump-forward plan, which a stream waits for
        seen["prefetched"] = matcher.mask_ready()
        seen["look_ahead_left"] = grammar.prefetch_pending
        ran.set()

    compiler.hold_background()  # the worker parks at the slice's start: both are queued
    try:
        compiler.prefetch(matcher)
        compiler.run_in_background(job)
    finally:
        compiler.release_background()
    assert ran.wait(60.0)
    compiler.shutdown()  # the look-ahead, after the job
    assert seen == {"prefetched": True, "look_ahead_left": True}
    successors, _ = grammar.index.successors(matcher.state)
    assert not grammar.prefetch_pending
    assert all(grammar.mask_ready(s) for s in successors.tolist())


def test_masks_are_the_same_when_look_ahead_gives_way(vocab) -> None:  # noqa: ANN001
    spec = GrammarSpec.json_schema(SCHEMA)
    grammar = GrammarCompiler(vocab, COLD).compile(spec)
    calls = [0]

    def every_third() -> bool:  # urgent work arriving now and then, inside masks too
        calls[0] += 1
        return calls[0] % 3 == 0

    grammar.prefetch(grammar.initial_state)
    for _ in range(2000):  # a budget in calls, not seconds
        if not grammar.prefetch_pending:
            break
        grammar.warm_up(1, float("inf"), prefetched_only=True, urgent=every_third)
    assert not grammar.prefetch_pending and calls[0] > 0
    reference = GrammarCompiler(vocab, COLD).compile(spec)
    states, tokens = grammar.index.successors(grammar.initial_state)
    assert np.array_equal(grammar.mask(grammar.initial_state).numpy(),
                          reference.mask(reference.initial_state).numpy())
    for state, token in zip(states.tolist(), tokens.tolist(), strict=True):
        assert grammar.mask_ready(state)  # computed by the look-ahead, not here
        ref = reference.dfa.walk(reference.initial_state, vocab.token_bytes[token])
        assert np.array_equal(grammar.mask(state).numpy(), reference.mask(ref).numpy())


def test_the_speculative_hold_parks_look_ahead_but_not_what_decoding_waits_for(vocab) -> None:  # noqa: ANN001, E501
    # parks as long as a test takes: what ends the look-ahead's park is urgent work
    compiler = GrammarCompiler(vocab, COLD, max_background_pause=600.0)
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    start = matcher.state
    compiler.speculative.hold()  # as a scheduler does through a step on a core it fills
    try:
        compiler.prefetch(matcher)
        assert matcher.wait_mask_ready(60.0), "the prefetched state's mask is computed"
        assert compiler.speculative.wait_parked(60.0), "the look-ahead parks"
        assert grammar.prefetch_pending and not grammar.urgent_pending
        assert matcher.accept_token(token_of(vocab, b"{"))  # decoding moves on, still held
        assert not matcher.mask_ready(), "a look-ahead state the park left cold"
        compiler.prefetch(matcher)
        assert matcher.wait_mask_ready(60.0), "urgent work does not wait for the hold's end"
    finally:
        compiler.speculative.release()
    compiler.shutdown()  # the look-ahead, once released
    successors, _ = grammar.index.successors(start)
    assert not grammar.prefetch_pending
    assert all(grammar.mask_ready(s) for s in successors.tolist())
