"""A length counter inside an intersection is clamped only where it cannot matter: for every
byte string up to the reach, the clamped term and the exact one agree on liveness and on
acceptance; bounded pattern strings then share one mask over most of their positions."""

from __future__ import annotations

import itertools
from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from regex_trees import regex_trees

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.term import AND_K, Term
from radixlm.fsm.regex import tree as ra
from radixlm.testing.real_vocabularies import RealVocabulary

UNIT = ra.alt(ra.char_set("ab"), ra.lit("cc"))  # a "character" of one or two bytes


def _patterns():  # noqa: ANN202
    """Patterns made of units (so inside ``UNIT*``, as an encoded string pattern is)."""
    return regex_trees(st.sampled_from([ra.lit("a"), ra.lit("b"), ra.lit("cc"), UNIT]), 6)


def _strings(max_len: int) -> list[bytes]:
    """Every byte string over a, b, c up to ``max_len`` (c alone splits a unit)."""
    return [bytes(p) for n in range(max_len + 1) for p in itertools.product(b"abc", repeat=n)]


def _agree(builder: TermBuilder, exact: Term, clamped: Term, reach: int) -> None:
    for w in _strings(reach):
        e, c = exact, clamped
        for byte in w:
            e, c = builder.derivative(e, byte), builder.derivative(c, byte)
        assert builder.is_live(e) == builder.is_live(c), w
        assert e.nullable == c.nullable, w


@settings(max_examples=150, deadline=None)
@given(pattern=_patterns(), hi=st.integers(0, 9), reach=st.integers(1, 4),
       prefix=st.text("abc", max_size=4))
def test_clamped_intersection_agrees_within_the_reach(pattern, hi, reach, prefix) -> None:
    builder = TermBuilder()
    exact = builder.lower(ra.constrained(pattern, [ra.repeat(UNIT, 0, hi)]))
    for byte in prefix.encode():  # somewhere inside the string, mid-unit too
        exact = builder.derivative(exact, byte)
    _agree(builder, exact, builder.clamp(exact, reach), reach)


def _bounded(builder: TermBuilder, pattern: ra.Node, hi: int, prefix: bytes) -> Term:
    term = builder.lower(ra.constrained(pattern, [ra.repeat(UNIT, 0, hi)]))
    for byte in prefix:
        term = builder.derivative(term, byte)
    return term


def test_counter_dropped_when_far_and_kept_near_its_end() -> None:
    builder = TermBuilder()
    pattern = ra.seq(ra.lit("a"), ra.star(UNIT))  # every state one byte from an end at most
    far = _bounded(builder, pattern, 12, b"ab")
    assert far.kind == AND_K and builder.clamp(far, 4).kind != AND_K
    _agree(builder, far, builder.clamp(far, 4), 4)
    near = _bounded(builder, pattern, 12, b"abababab")  # 4 units left: within the reach
    assert builder.clamp(near, 4) is near


def test_counter_kept_when_completions_are_long() -> None:
    builder = TermBuilder()
    pattern = ra.repeat(ra.lit("a"), 6, 6)  # from the start, 6 bytes to go
    term = _bounded(builder, pattern, 9, b"")
    forced = builder.derivative(term, ord("a"))
    assert builder.clamp(forced, 4) is forced  # 8 units left < reach 4 + radius 5


def test_counter_kept_when_the_pattern_leaves_the_unit_language() -> None:
    builder = TermBuilder()
    pattern = ra.seq(ra.lit("a"), ra.star(ra.lit("x")))  # x is no unit
    term = builder.derivative(_bounded(builder, pattern, 40, b""), ord("a"))
    assert term.kind == AND_K and builder.clamp(term, 4) is term
    _agree(builder, term, builder.clamp(term, 4), 4)


SCHEMA = {"type": "object", "properties": {
    "site": {"type": "string", "format": "uri", "maxLength": 200},
    "code": {"type": "string", "pattern": "^[a-z]+( [a-z]+)*$", "maxLength": 150}},
    "required": ["site", "code"], "additionalProperties": False}
TEXT = ('{"site": "https://example.org/some/rather/long/path/with/segments/and?query=1&more='
        'words#fragment-here", "code": "lower case words and more lower case words and yet '
        'more of them to fill the field"}')
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)


def test_bounded_pattern_strings_share_masks_and_stay_exact(real: RealVocabulary) -> None:
    grammar = GrammarCompiler(real.vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    tokens = real.encode(TEXT)
    vocab = real.vocab
    lengths = np.array([len(b) if b else 0 for b in vocab.token_bytes])
    for token in tokens:
        state = matcher.state
        bits = np.unpackbits(grammar.mask(state).numpy().view(np.uint8), bitorder="little")
        allowed = np.flatnonzero(bits[: vocab.vocab_size])
        # exact for the tokens that reach a counter's end, by walking each on its own
        for t in np.flatnonzero(lengths >= 1)[::97]:
            assert (t in allowed) == (grammar.dfa.walk(state, vocab.token_bytes[t]) != 0)
        assert matcher.accept_token(token)
    assert matcher.is_finished() or grammar.dfa.accepting[matcher.state]
    # positions inside the two bounded strings share masks, as free strings' do
    assert grammar.index.num_masks > 2 * grammar.index.num_distinct_masks


def test_masks_equal_the_unclamped_grammars(real: RealVocabulary) -> None:
    spec = GrammarSpec.json_schema(SCHEMA)
    plain = GrammarCompiler(real.vocab, replace(COLD, short_reach_masks=False)).compile(spec)
    plain.dfa.builder.clamp_budget = 0  # no counter clamped inside intersections
    grammar = GrammarCompiler(real.vocab, COLD).compile(spec)
    a, b = grammar.new_matcher(), plain.new_matcher()
    for token in real.encode(TEXT):
        assert np.array_equal(grammar.mask(a.state).numpy(), plain.mask(b.state).numpy())
        assert a.accept_token(token) and b.accept_token(token)
    assert grammar.index.num_distinct_masks < plain.index.num_distinct_masks
