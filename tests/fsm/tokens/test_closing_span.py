"""A state's closing span (the widest distance after a token, and whether one is unknown):
it tells the same as the closing row whether a budget cuts the mask, so the row is built
only where a budget may cut; the masks cut to any budget are the same either way."""

from __future__ import annotations

import random

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_closing_index import EOS, QUIET, TOKENS, TREES  # the same random grammars

from radixlm.fsm import GrammarCompiler, GrammarSpec, TokenVocabulary
from radixlm.fsm.regex import tree as ra


def _compiler() -> GrammarCompiler:
    return GrammarCompiler(TokenVocabulary(TOKENS, len(TOKENS), [EOS]), QUIET)


def _cut(matcher, remaining: int) -> tuple[bool, list[int]]:  # noqa: ANN001
    vocab = matcher.grammar.vocab
    out = np.zeros(vocab.num_words, dtype=np.int32)
    matcher.fill_bitmask(out)
    removed = matcher.close_within(out, remaining)
    bits = np.unpackbits(out.view(np.uint8), bitorder="little")[: vocab.vocab_size]
    return removed, np.flatnonzero(bits).tolist()


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(TREES, st.integers(0, 1000), st.integers(0, 8))
def test_spans_first_cut_every_budget_as_rows_first(tree, seed: int, budget: int) -> None:
    """Two fresh compiles of one grammar walked by the same tokens: one builds each state's
    row at once (as before spans), the other asks the span first, as the warm-up now does;
    every budget's cut mask is the same, and far budgets build no row."""
    text = ra.render(tree)
    rows_first = _compiler().compile(GrammarSpec.regex(text)).new_matcher()
    spans_first = _compiler().compile(GrammarSpec.regex(text)).new_matcher()
    rng = random.Random(seed)
    for _ in range(8):
        state = spans_first.state
        rows_first.grammar.closing.row(rows_first.state)
        grammar = spans_first.grammar
        widest, unknown = grammar.closing.span(state, grammar.index.successors(state)[0])
        row = rows_first.grammar.closing.row(rows_first.state)
        assert (widest, unknown) == (row.widest, row.unknown)
        for remaining in (1, 2, 3, budget, 1 << 20):
            assert _cut(spans_first, remaining) == _cut(rows_first, remaining)
        assert grammar.closing.row_ready(state) == any(
            grammar.closing.cuts(state, r) for r in (1, 2, 3, budget, 1 << 20))
        ids = [t for t in _cut(rows_first, 1 << 30)[1] if t != EOS]
        if not ids or rows_first.must_end():
            break
        token = rng.choice(ids)
        assert rows_first.accept_token(token) and spans_first.accept_token(token)


def test_a_prefetch_with_a_far_budget_computes_the_span_not_the_row() -> None:
    compiler = _compiler()
    grammar = compiler.compile(GrammarSpec.regex("(ab|c){0,20}b"))
    grammar.closing_used = True
    matcher = grammar.new_matcher()
    grammar.prefetch(matcher.state, 50)
    grammar.warm_up(max_states=4, max_seconds=float("inf"))
    assert matcher.mask_ready(50)  # the span shows that 50 tokens cut nothing
    assert not grammar.closing.row_ready(matcher.state)
    assert not matcher.mask_ready(True) and not matcher.mask_ready(1)  # the row is needed
    grammar.prefetch(matcher.state, 1)  # near the end: the row is computed
    grammar.warm_up(max_states=4, max_seconds=float("inf"))
    assert grammar.closing.row_ready(matcher.state) and matcher.mask_ready(1)


def test_close_within_a_far_budget_on_a_fresh_state_builds_no_row() -> None:
    """A state reached first by close_within (a speculative verify's trial matcher, never
    prefetched) takes its span from the mask walk's successors: a budget that cuts nothing
    builds no row; one that may cut builds it, and cuts as the row does."""
    text = "(ab|c){0,20}b"
    spans = _compiler().compile(GrammarSpec.regex(text)).new_matcher()
    rows = _compiler().compile(GrammarSpec.regex(text)).new_matcher()
    closing = spans.grammar.closing
    assert closing.cuts(spans.state, 50) is None  # neither row nor span yet
    assert _cut(spans, 50) == (False, _cut(rows, 1 << 30)[1])
    assert closing.cuts(spans.state, 50) is False and not closing.row_ready(spans.state)
    rows.grammar.closing.row(rows.state)
    for remaining in (1, 2, 3, 50):
        assert _cut(spans, remaining) == _cut(rows, remaining)
    assert closing.row_ready(spans.state)


def test_close_within_walks_for_the_span_where_the_mask_walk_kept_no_successors() -> None:
    """A state whose mask is shared with another state's (same mask key) has no successors
    kept: close_within walks for them rather than building the row."""
    text = "(ab|c){0,20}b"
    spans = _compiler().compile(GrammarSpec.regex(text)).new_matcher()
    rows = _compiler().compile(GrammarSpec.regex(text)).new_matcher()
    index, closing = spans.grammar.index, spans.grammar.closing
    index.mask(spans.state)
    index._successors.clear()  # as for a state that took another's mask
    assert _cut(spans, 50) == (False, _cut(rows, 1 << 30)[1])
    assert closing.cuts(spans.state, 50) is False and not closing.row_ready(spans.state)
    assert index.cached_successors(spans.state) is not None
