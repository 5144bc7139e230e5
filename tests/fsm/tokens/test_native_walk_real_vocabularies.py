"""The compiled trie walk gives exactly the numpy walk's tokens and states on real vocabularies
(SmolLM2's 49k byte-level BPE, Mistral's 131k tekken, Mistral's 32k SentencePiece, Gemma 3's
262k SentencePiece), at every state of a JSON document's decoding, and both equal each token
walked on its own."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.fsm.automaton.lazy_dfa import DEAD
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.fsm.tokens.state_loops import StateLoops
from radixlm.fsm.tokens.token_trie import SeenFlags
from radixlm.testing.real_vocabularies import RealVocabulary

pytestmark = pytest.mark.skipif(not trie_walk_kernel.AVAILABLE, reason="numba is not "
                                "installed (the compiled trie walk is optional: pip install "
                                "radixlm[native])")

# keys (sparse states), a bounded string (dense, not looping), a free string (the byte-set
# path), a number, an enum
SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "note": {"type": "string"},
    "n": {"type": "number"}, "kind": {"enum": ["alpha", "beta", "gamma delta"]}},
    "required": ["name", "note", "n", "kind"], "additionalProperties": False}
TEXT = '{"name": "Zoë x", "note": "日本 😀 \\"q\\"", "n": -12.5e3, "kind": "gamma delta"}'
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)
# strings whose states loop on some bytes only (the walk's subtree skips: subtree_summary)
PATTERNED = {"type": "object", "properties": {
    "tag": {"type": "string", "pattern": "^[a-zé ]+$"}, "id": {"type": "string",
                                                           "pattern": "^[A-Z0-9_]*$"}},
    "required": ["tag", "id"], "additionalProperties": False}
PATTERNED_TEXT = '{"tag": "café au lait", "id": "AB_12"}'


@pytest.fixture(autouse=True, scope="module")
def _loaded() -> None:
    trie_walk_kernel.warm()  # walks use numpy until the loop is loaded
    assert trie_walk_kernel.ready()


def _same(a, b) -> bool:  # noqa: ANN001
    """Two walks found the same tokens and the same successor states."""
    return np.array_equal(a.words, b.words) and np.array_equal(a.states, b.states)


def _states(grammar, real: RealVocabulary, text: str = TEXT) -> list[int]:  # noqa: ANN001
    """The states decoding ``text`` passes through (the tokenizer's own split)."""
    matcher, states = grammar.new_matcher(), [grammar.initial_state]
    for token in real.encode(text):
        assert matcher.accept_token(token), real.vocab.token_bytes[token]
        states.append(matcher.state)
    return states


def test_walks_agree_at_every_state(real: RealVocabulary) -> None:
    grammar = GrammarCompiler(real.vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    dfa, trie = grammar.dfa, real.vocab.trie
    states = _states(grammar, real)
    words = real.vocab.num_words
    for k, state in enumerate(states):
        native = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, words, lambda: dfa.built)
        plain = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, words, None)
        assert _same(native, plain), f"state {k} of {len(states)}"
        for s, t in zip(native.states.tolist(), native.tokens.tolist(), strict=True):
            assert dfa.walk(state, real.vocab.token_bytes[t]) == s, "a token reaching it"
    for state in states[:3]:  # and the reference: every token on its own (slow: a few)
        expected = {t: dfa.walk(state, b) for t, b in enumerate(real.vocab.token_bytes) if b}
        live = {t: s for t, s in expected.items() if s != DEAD}
        got = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, words, lambda: dfa.built)
        bits = np.unpackbits(got.words.view(np.uint8), bitorder="little")
        assert np.flatnonzero(bits).tolist() == sorted(live)
        assert got.states.tolist() == sorted(set(live.values()))


def test_masks_agree_with_either_walk(real: RealVocabulary) -> None:
    """Separate grammars (each builds its own rows, in its walk's order): the same masks."""
    spec = GrammarSpec.json_schema(SCHEMA)
    native = GrammarCompiler(real.vocab, replace(COLD, native_trie_walk=True)).compile(spec)
    plain = GrammarCompiler(real.vocab, replace(COLD, native_trie_walk=False)).compile(spec)
    a, b = native.new_matcher(), plain.new_matcher()
    for token in [*real.encode(TEXT), None]:
        assert np.array_equal(native.mask(a.state).numpy(), plain.mask(b.state).numpy())
        if token is not None:
            assert a.accept_token(token) and b.accept_token(token)


def test_walks_agree_in_patterned_strings(real: RealVocabulary) -> None:
    """States looping on a few bytes (and on one non-ASCII character): the skipping walk
    equals the numpy walk, on a fresh grammar and again with the answers it kept."""
    grammar = GrammarCompiler(real.vocab, COLD).compile(GrammarSpec.json_schema(PATTERNED))
    dfa, trie = grammar.dfa, real.vocab.trie
    words, loops = real.vocab.num_words, StateLoops()
    for state in _states(grammar, real, PATTERNED_TEXT) * 2:
        native = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, words, lambda: dfa.built,
                           SeenFlags(), loops)
        plain = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, words, None)
        assert _same(native, plain)
