"""Closing within a token budget: the distance is a true upper bound on the tokens that
complete an output, and a mask cut to the budget never leads to a dead end."""

from __future__ import annotations

import random

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from radixlm.fsm import (
    CompileBudget,
    GrammarCompiler,
    GrammarError,
    GrammarSpec,
    TokenVocabulary,
)
from radixlm.fsm.automaton.lazy_dfa import shortest_completion
from radixlm.fsm.regex import tree as ra
from radixlm.fsm.tokens.closing_index import ClosingIndex

EOS = 0
TOKENS = [b"", b"a", b"b", b"c", b"ab", b"cc", b"abc", b"bca", b"ccc", b"ba"]
QUIET = CompileBudget(background_warmup_states=0)


def _compiler(tokens: list[bytes]) -> GrammarCompiler:
    return GrammarCompiler(TokenVocabulary(tokens, len(tokens), [EOS]), QUIET)


FULL = _compiler(TOKENS)
NO_C = _compiler([t for t in TOKENS if t != b"c"])  # "c" only inside longer tokens
LEAVES = st.sampled_from([ra.lit("a"), ra.lit("b"), ra.lit("cc"), ra.lit("abc"),
                          ra.char_set("ab")])
TREES = st.recursive(LEAVES, lambda inner: st.one_of(
    st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.seq(*xs)),
    st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.alt(*xs)),
    st.tuples(inner, st.integers(0, 3), st.integers(0, 5)).map(
        lambda t: ra.repeat(t[0], min(t[1], t[2]), max(t[1], t[2]))),
    inner.map(ra.star),
), max_leaves=6)


def _allowed(matcher, remaining: int) -> list[int]:  # noqa: ANN001
    vocab = matcher.grammar.vocab
    out = np.zeros(vocab.num_words, dtype=np.int32)
    matcher.fill_bitmask(out)
    matcher.close_within(out, remaining)
    bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: vocab.vocab_size]
    return np.flatnonzero(bits).tolist()


def _states_along(matcher, rng: random.Random, steps: int) -> list[int]:  # noqa: ANN001
    """The states of a random unconstrained walk (the grammar's mask only)."""
    states = [matcher.state]
    for _ in range(steps):
        ids = [t for t in _allowed(matcher, 1 << 30) if t != EOS]
        if not ids:
            break
        matcher.accept_token(rng.choice(ids))
        states.append(matcher.state)
    return states


def _fewest_tokens(grammar, state: int, limit: int = 12) -> int | None:  # noqa: ANN001
    """The fewest tokens from ``state`` to an accepting state (breadth first over tokens)."""
    frontier, seen = {state}, {state}
    for depth in range(limit + 1):
        if any(grammar.dfa.accepting[s] for s in frontier):
            return depth
        nxt = set()
        for s in frontier:
            for t in range(1, grammar.vocab.vocab_size):
                v = grammar.next_state(s, t)
                if v and v not in seen:
                    seen.add(v)
                    nxt.add(v)
        frontier = nxt
    return None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.integers(0, 1000))
def test_the_distance_bounds_the_fewest_tokens_and_the_fewest_bytes(tree, seed: int) -> None:
    grammar = FULL.compile(GrammarSpec.regex(ra.render(tree)))
    for state in _states_along(grammar.new_matcher(), random.Random(seed), 8):
        shortest = shortest_completion(grammar.dfa, state)
        fewest = _fewest_tokens(grammar, state)
        dist = grammar.closing.dist(state)
        assert fewest is not None and fewest <= dist <= len(shortest)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.integers(0, 6), st.integers(0, 1000), st.booleans())
def test_a_mask_cut_to_the_budget_always_closes_in_time(tree, extra: int, seed: int,
                                                        no_c: bool) -> None:
    try:
        grammar = (NO_C if no_c else FULL).compile(GrammarSpec.regex(ra.render(tree)))
    except GrammarError:  # without the single-byte "c" some grammars cannot be spelled
        assert no_c
        return
    matcher = grammar.new_matcher()
    need = matcher.tokens_to_close()
    if need is None:  # only without the single-byte "c": no promise, nothing to check
        assert no_c
        return
    budget, rng = need + extra, random.Random(seed)
    for used in range(budget):
        if matcher.is_finished() or matcher.must_end():
            break
        ids = _allowed(matcher, budget - used)
        assert ids, "a mask cut to the budget is never empty"
        assert matcher.accept_token(rng.choice(ids))
        assert (matcher.tokens_to_close() or 0) <= budget - used - 1
    assert matcher.is_finished() or matcher.can_end()


def test_paths_are_cut_into_the_fewest_tokens_and_avoid_what_cannot_be_spelt() -> None:
    assert FULL.compile(GrammarSpec.regex("abcabc|a{7}")).new_matcher().tokens_to_close() == 2
    assert FULL.compile(GrammarSpec.regex("cb|aaaa")).new_matcher().tokens_to_close() == 2
    # without "c" alone, "cb" cannot be spelt: the path over single-byte tokens is taken
    assert NO_C.compile(GrammarSpec.regex("cb|aaaa")).new_matcher().tokens_to_close() == 4
    assert NO_C.compile(GrammarSpec.regex("ccb|aaaa")).new_matcher().tokens_to_close() == 2


def test_past_the_search_bound_nothing_is_promised() -> None:
    grammar = FULL.compile(GrammarSpec.regex("(ab){30}"))
    grammar.closing = ClosingIndex(grammar.dfa, grammar.vocab, max_search_states=3)
    matcher = grammar.new_matcher()
    assert matcher.tokens_to_close() is None
    out = np.zeros(grammar.vocab.num_words, dtype=np.int32)
    matcher.fill_bitmask(out)
    assert matcher.close_within(out, 1 << 20)  # a successor of unknown distance is cut
    assert not out.any()


def test_far_from_the_budget_nothing_is_cut() -> None:
    matcher = FULL.compile(GrammarSpec.regex("(ab|c){0,20}b")).new_matcher()
    full = _allowed(matcher, 1 << 30)
    assert _allowed(matcher, 50) == full
    vocab = matcher.grammar.vocab
    out = np.zeros(vocab.num_words, dtype=np.int32)
    matcher.fill_bitmask(out)
    assert not matcher.close_within(out, 50)
    assert matcher.close_within(out, 1)  # only "b" ends the output now
    bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: vocab.vocab_size]
    assert np.flatnonzero(bits).tolist() == [TOKENS.index(b"b")]


@pytest.mark.parametrize("text", ["x{3}|y", "(x{2}|y{5})z"])
def test_a_token_that_raises_the_distance_is_cut_even_early(text: str) -> None:
    compiler = _compiler([b"", b"x", b"y", b"z", b"xx"])
    matcher = compiler.compile(GrammarSpec.regex(text)).new_matcher()
    need = matcher.tokens_to_close()
    for t in _allowed(matcher, need):
        trial = matcher.copy()
        trial.accept_token(t)
        assert trial.tokens_to_close() <= need - 1
