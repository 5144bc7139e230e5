"""GrammarCompiler.held_quietly: the worker held off the GIL for a block (the scheduler's
token advances after a forward) and not woken meanwhile; the prefetches asked for in the block
are computed once it ends. Observed through the pool's submissions and masks ready, never
through timing."""

from __future__ import annotations

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "n": {"type": "integer", "minimum": 3}},
    "required": ["name"]}
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)
PATIENCE = 120.0  # seconds a test waits for the worker before failing (a hang, not a timing)


def test_prefetches_in_a_quiet_hold_wake_the_worker_once_when_it_ends(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, COLD)
    try:
        grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
        first, second = grammar.new_matcher(), grammar.new_matcher()
        submitted: list[str] = []
        submit = compiler._pool.submit

        def counted(fn, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
            submitted.append(fn.__name__)
            return submit(fn, *args, **kwargs)

        compiler._pool.submit = counted
        with compiler.held_quietly():
            assert compiler.background.held
            assert not compiler.prefetch(first), "cold: the start state's mask is not ready"
            compiler.prefetch(second)  # the same grammar: one slice serves both
            assert submitted == [], "the worker is not woken inside the block"
        assert not compiler.background.held
        assert submitted == ["_prefetch_in_background"]
        assert first.wait_mask_ready(PATIENCE), "what was asked for in the block is computed"
        brace = next(i for i, b in enumerate(vocab.token_bytes) if b == b"{")
        submitted.clear()
        with compiler.held_quietly():
            with compiler.held_quietly():
                compiler.prefetch_advance(first, brace)
            assert submitted == [] and compiler.background.held, "nested: the outer holds"
        assert submitted == ["_prefetch_in_background"] and not compiler.background.held
        assert first.wait_advance_ready(brace, True, PATIENCE)
    finally:
        compiler.shutdown()


def test_the_worker_computes_a_closing_distance_a_scheduler_deferred(vocab) -> None:  # noqa: ANN001
    """prefetch_closing_dist: the search a jump-forward's budget check needs, made by the
    worker (handed over when a quiet hold ends); the caller sleeps for it, computing nothing."""
    compiler = GrammarCompiler(vocab, COLD)
    try:
        grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
        state = grammar.dfa.walk(grammar.initial_state, b'{"name": "ab')
        assert not grammar.closing_dist_ready(state), "not searched yet"
        assert not grammar.wait_closing_dist(state, 0.0)
        with compiler.held_quietly():
            compiler.prefetch_closing_dist(grammar, state)
        assert grammar.wait_closing_dist(state, PATIENCE)
        assert grammar.closing.cached_dist(state) == grammar.closing.dist(state) > 0
    finally:
        compiler.shutdown()
