"""Prefetch: masks computed where decoding is, off the caller; cold masks are counted."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from cold_grammar import COLD, SCHEMA, token_of

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError, GrammarSpec
from radixlm.fsm.tokens import trie_walk_kernel


def test_prefetch_computes_the_state_and_its_successors_off_the_caller(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, COLD)
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    assert not matcher.mask_ready()
    assert compiler.prefetch(matcher) is False  # not ready yet: queued
    compiler.shutdown()  # waits for the queued slice
    assert matcher.mask_ready()
    row = np.zeros(vocab.num_words, dtype=np.int32)
    matcher.fill_bitmask(row)
    assert grammar.waits.count == 0  # nothing computed on the caller's path
    assert matcher.accept_token(token_of(vocab, b"{"))
    assert matcher.mask_ready()  # a successor of the prefetched state: warmed with it


def test_prefetched_states_go_before_breadth_first_order(vocab) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    for byte in b'{"alpha":"':  # one single-byte token each: deep in the grammar
        assert matcher.accept_token(token_of(vocab, bytes([byte])))
    assert not matcher.mask_ready()
    assert grammar.prefetch(matcher.state) is False
    grammar.warm_up(max_states=1, max_seconds=float("inf"))
    assert matcher.mask_ready()
    assert not grammar.mask_ready(grammar.initial_state)  # breadth first had to wait


def test_cold_masks_are_counted_as_waits(vocab) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    row = np.zeros(vocab.num_words, dtype=np.int32)
    matcher.fill_bitmask(row)
    matcher.fill_bitmask(row)  # cached now: not a wait
    assert grammar.waits.count == 1
    assert grammar.waits.max_seconds == grammar.waits.seconds > 0
    assert np.array_equal(row, grammar.mask(grammar.initial_state).numpy())


def test_fill_within_a_bound_defers_and_resumes_to_the_exact_mask(vocab) -> None:  # noqa: ANN001
    spec = GrammarSpec.json_schema(SCHEMA)
    grammar = GrammarCompiler(vocab, COLD).compile(spec)
    matcher = grammar.new_matcher()
    row = np.zeros(vocab.num_words, dtype=np.int32)
    attempts = 0
    while not matcher.fill_bitmask_within(row, 0.0):  # each try keeps its automaton rows
        attempts += 1
        assert not row.any() and attempts < 10_000
    assert grammar.waits.deferred == attempts > 0
    assert grammar.waits.count == attempts + 1
    fresh = GrammarCompiler(vocab, COLD).compile(spec)
    assert np.array_equal(row, fresh.mask(fresh.initial_state).numpy())
    assert matcher.fill_bitmask_within(row, 0.0)  # ready now: a copy, not a wait
    assert grammar.waits.count == attempts + 1


def test_waiting_for_a_mask_computes_nothing_and_wakes_when_the_worker_is_done(vocab) -> None:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, COLD)
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    masks = grammar.index.num_masks
    assert matcher.wait_mask_ready(0.0) is False
    assert grammar.index.num_masks == masks and grammar.waits.count == 0, "nothing computed"
    compiler.prefetch(matcher)
    assert matcher.wait_mask_ready(600.0) is True  # woken by the worker, long before that
    assert grammar.waits.count == 0
    compiler.shutdown()


def test_a_mask_the_warm_up_cannot_compute_fails_its_fill_at_once(vocab) -> None:  # noqa: ANN001
    budget = CompileBudget(warmup_states=0, background_warmup_states=0, max_mask_steps=1)
    compiler = GrammarCompiler(vocab, budget)
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    compiler.prefetch(matcher)
    compiler.shutdown()  # the worker hit the budget on that mask
    assert matcher.mask_ready() and matcher.wait_mask_ready(0.0), "a waiter is not left waiting"
    terms = grammar.dfa.builder.num_terms
    row = np.zeros(vocab.num_words, dtype=np.int32)
    with pytest.raises(GrammarError, match="mask steps"):
        matcher.fill_bitmask(row)
    assert grammar.dfa.builder.num_terms == terms, "the error is the worker's, not recomputed"


@pytest.mark.skipif(not trie_walk_kernel.AVAILABLE, reason="numba is not installed (the "
                    "compiled trie walk is optional: pip install radixlm[native])")
def test_the_compiled_trie_walk_gives_the_same_masks(vocab) -> None:  # noqa: ANN001
    spec = GrammarSpec.json_schema(SCHEMA)
    plain = GrammarCompiler(vocab, replace(COLD, native_trie_walk=False)).compile(spec)
    compiler = GrammarCompiler(vocab, replace(COLD, native_trie_walk=True))
    compiler.wait_started()  # numba's loop loaded (walks use numpy until it is)
    assert trie_walk_kernel.ready()
    native = compiler.compile(spec)
    a, b = plain.new_matcher(), native.new_matcher()
    for byte in b'{"alpha":"xy","beta":"':
        assert np.array_equal(plain.mask(a.state).numpy(), native.mask(b.state).numpy())
        token = token_of(vocab, bytes([byte]))
        assert a.accept_token(token) and b.accept_token(token)
