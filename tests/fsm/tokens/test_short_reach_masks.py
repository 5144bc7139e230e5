"""Masks composed of a shared short-token part and a per-state walk of the long tokens equal
the masks walked whole, on real vocabularies (SmolLM2's 49k, tekken's 131k, the 32k
SentencePiece, Gemma 3's 262k), through bounded strings (where the parts are shared) and every
other kind of state of a JSON document; and each equals every token walked on its own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.testing.real_vocabularies import RealVocabulary

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 60},
    "code": {"type": "string", "pattern": "^[A-Z][a-z0-9 ]*$", "maxLength": 40},
    "note": {"type": "string"}, "n": {"type": "integer"},
    "tags": {"type": "array", "items": {"type": "string", "maxLength": 30}, "maxItems": 3}},
    "required": ["name", "code", "note", "n", "tags"], "additionalProperties": False}
TEXT = ('{"name": "A fairly long name, with words    and spaces: Zoë 日本", "code": '
        '"Abc 12 and more", "note": "free \\"text\\"", "n": -1200, '
        '"tags": ["one two three", "四", "                 spaced"]}')
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)


@pytest.fixture(autouse=True, scope="module")
def _loaded() -> None:
    trie_walk_kernel.warm()  # both numba and numpy walks are covered either way


def test_long_tokens_are_few_and_exactly_those_past_the_reach(real: RealVocabulary) -> None:
    vocab = real.vocab
    lengths = np.array([len(b) if b else 0 for b in vocab.token_bytes])
    long = lengths > vocab.short_reach
    assert 0 < long.sum() <= 256  # the reach is the shortest with at most 256 past it
    assert vocab.short_reach == 8 or (lengths > vocab.short_reach - 1).sum() > 256
    bits = np.unpackbits(vocab.long_words.view(np.uint8), bitorder="little")
    assert np.array_equal(np.flatnonzero(bits[: vocab.vocab_size]), np.flatnonzero(long))
    trie = vocab.long_trie
    assert trie.num_tokens == long.sum()


@pytest.mark.parametrize("native", [True, False])
def test_composed_masks_equal_whole_walks(real: RealVocabulary, native: bool) -> None:
    spec = GrammarSpec.json_schema(SCHEMA)
    budget = replace(COLD, native_trie_walk=native)
    composed = GrammarCompiler(real.vocab, replace(budget, short_reach_masks=True)).compile(spec)
    whole = GrammarCompiler(real.vocab, replace(budget, short_reach_masks=False)).compile(spec)
    assert real.vocab.short_reach < real.vocab.max_token_len  # the composition is used
    a, b = composed.new_matcher(), whole.new_matcher()
    tokens = real.encode(TEXT)
    for token in [*tokens, None]:
        assert np.array_equal(composed.mask(a.state).numpy(), whole.mask(b.state).numpy())
        if token is not None:
            assert a.accept_token(token) and b.accept_token(token)
    assert a.is_finished() or composed.dfa.accepting[a.state]
    # inside the bounded strings the short parts were shared between positions
    assert composed.index.num_short_masks < composed.index.num_masks


def test_composed_mask_equals_each_token_walked(real: RealVocabulary) -> None:
    grammar = GrammarCompiler(real.vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    matcher = grammar.new_matcher()
    prefix = '{"name": "A fairly long name, with words'
    for token in real.encode(prefix)[:-1]:
        assert matcher.accept_token(token)
    for state in (matcher.state, grammar.initial_state):
        words = grammar.mask(state).numpy()
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[: real.vocab.vocab_size]
        expected = np.zeros_like(bits)
        for t, data in enumerate(real.vocab.token_bytes):
            if data and grammar.dfa.walk(state, data):
                expected[t] = 1
        for e in real.vocab.eos_token_ids:
            expected[e] = grammar.dfa.accepting[state]
        assert np.array_equal(bits, expected)
