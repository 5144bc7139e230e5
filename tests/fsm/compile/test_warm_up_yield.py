"""Background warm-up gives way inside a mask (``yield_to``): the mask is finished later,
identical to one computed in one go; per-vocabulary data is built once per compiler."""

from __future__ import annotations

import numpy as np
import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12}, "tags": {"type": "array", "items": {
        "enum": ["alpha", "beta", "gamma"]}}, "n": {"type": "integer", "minimum": 3}},
    "required": ["name"]}
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)


def _every(k: int):  # noqa: ANN202
    """A ``yield_to`` that says yes at every k-th check (a compile arriving now and then)."""
    calls = [0]

    def ask() -> bool:
        calls[0] += 1
        return calls[0] % k == 0

    return ask


def _same_masks(grammar, reference, paths: dict[int, bytes]) -> None:  # noqa: ANN001
    for state, path in paths.items():
        ref_state = reference.dfa.walk(reference.initial_state, path)
        assert np.array_equal(grammar.mask(state).numpy(), reference.mask(ref_state).numpy())


def test_a_yield_before_any_work_computes_nothing(vocab) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    assert grammar.warm_up(5, float("inf"), yield_to=lambda: True) == {}
    assert not grammar.cached_masks and grammar.warm_up_pending
    assert len(grammar.warm_up(5, float("inf"))) == 5  # then it resumes as usual


@pytest.mark.parametrize("k", [2, 3, 5, 8, 13])
def test_masks_stopped_mid_walk_resume_identical(vocab, k: int) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    reference = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    ask, paths, stopped = _every(k), {}, 0
    for _ in range(2000):  # a budget in calls, not seconds
        if not grammar.warm_up_pending or len(paths) >= 40:
            break
        done = grammar.warm_up(1, float("inf"), yield_to=ask)
        stopped += not done
        paths.update(done)
    assert stopped and len(paths) >= 10  # it did give way, and still made progress
    _same_masks(grammar, reference, paths)


def test_background_warm_up_yielding_to_compiles_finishes_the_same(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(warmup_states=1,
                                                    background_warmup_states=30))
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    futures = [compiler.compile_async(GrammarSpec.json_schema(  # while the worker warms up
        {"type": "object", "properties": {f"k{i}": {"type": "string"}}})) for i in range(6)]
    for future in futures:
        future.result()
    grammar.warm_up(30, float("inf"))  # whatever the background left, beside it (one lock)
    compiler.shutdown()
    reference = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    paths = reference.warm_up(30, float("inf"))
    for ref_state, path in paths.items():
        state = grammar.dfa.walk(grammar.initial_state, path)
        assert np.array_equal(grammar.mask(state).numpy(), reference.mask(ref_state).numpy())


def test_compilers_share_the_vocabulary_data_built_once(vocab) -> None:  # noqa: ANN001
    first = GrammarCompiler(vocab, COLD)
    assert vocab.prepared  # built on construction, off every compile's clock
    extendable, fingerprint = vocab.extendable, vocab.fingerprint
    a = first.compile(GrammarSpec.json_schema(SCHEMA))
    b = GrammarCompiler(vocab, COLD).compile(GrammarSpec.regex("[a-z]+"))
    assert a.vocab.trie is b.vocab.trie and vocab.extendable is extendable
    assert vocab.fingerprint is fingerprint
