"""The C trie walk (``trie_walk_native.c``) equals numba's compiled loop of the same code on real
vocabularies, at every state of a JSON document's and a patterned string's decoding (the
other tests of the walk run whichever loop is in use, the C one where built, against numpy's
walk)."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.fsm.tokens.state_loops import StateLoops
from radixlm.fsm.tokens.token_trie import SeenFlags
from radixlm.testing.real_vocabularies import RealVocabulary

pytestmark = [
    pytest.mark.skipif(trie_walk_kernel._c_loop is None,  # noqa: SLF001
                       reason="the C trie walk is not built (python setup.py build_ext)"),
    pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                       reason="numba is not installed (the loop compared with)"),
]

SCHEMA = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 24}, "note": {"type": "string"},
    "n": {"type": "number"}, "kind": {"enum": ["alpha", "beta", "gamma delta"]},
    "tag": {"type": "string", "pattern": "^[a-zé ]+$"}},
    "required": ["name", "note", "n", "kind", "tag"], "additionalProperties": False}
TEXT = ('{"name": "Zoë x", "note": "日本 😀 \\"q\\"", "n": -12.5e3, "kind": "gamma delta", '
        '"tag": "café au lait"}')
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)


def _walks(real: RealVocabulary, monkeypatch: pytest.MonkeyPatch, numba: bool) -> list:
    """Every state's walk, on a fresh grammar, with one loop (the DFA rows are built in the
    order the loop asks for them, so each loop gets its own grammar)."""
    if numba:
        monkeypatch.setattr(trie_walk_kernel, "_c_loop", None)
    trie_walk_kernel.warm()
    grammar = GrammarCompiler(real.vocab, COLD).compile(GrammarSpec.json_schema(SCHEMA))
    dfa, trie, loops = grammar.dfa, real.vocab.trie, StateLoops()
    matcher, states = grammar.new_matcher(), [grammar.initial_state]
    for token in real.encode(TEXT):
        assert matcher.accept_token(token)
        states.append(matcher.state)
    walks = [trie.walk(lambda: dfa.trans, s, dfa.ensure_rows, real.vocab.num_words,
                       lambda: dfa.built, SeenFlags(), loops) for s in states * 2]
    monkeypatch.undo()
    return walks


def test_c_loop_equals_numba_loop(real: RealVocabulary, monkeypatch: pytest.MonkeyPatch
                                  ) -> None:
    c_walks = _walks(real, monkeypatch, numba=False)
    numba_walks = _walks(real, monkeypatch, numba=True)
    assert len(c_walks) == len(numba_walks)
    for k, (a, b) in enumerate(zip(c_walks, numba_walks, strict=True)):
        assert np.array_equal(a.words, b.words), k
        assert np.array_equal(a.states, b.states), k
        assert np.array_equal(a.tokens, b.tokens), k


def test_c_loop_refuses_wrong_dtypes() -> None:
    args = [np.zeros((2, 256), np.int32), np.ones(2, bool), 0, np.ones(2, np.int32),
            np.zeros(1, np.uint8), np.ones(1, np.uint16), np.array([1], np.int32),
            np.zeros(1, np.int32), np.zeros(2, np.int32), np.zeros(1, np.int32),
            np.zeros((1, 2), np.uint64), np.zeros(1, np.uint8), np.zeros(1, np.int32),
            np.zeros(2, np.int32), np.zeros(1, np.uint16), np.ones(1, np.uint16),
            np.ones(1, np.uint16), np.zeros(1, np.uint16), np.zeros(2, np.uint8),
            np.zeros((2, 2), np.uint64),
            np.zeros(2, np.uint8), np.full(2, -1, np.int32), np.zeros(2, np.uint8),
            np.zeros(2, np.int32), np.zeros((2, 2), np.uint64), np.zeros((2, 2), np.uint64),
            np.zeros(2, np.int32), np.zeros(2, np.uint32), np.zeros(2, np.uint8),
            np.zeros(1, np.int32), np.zeros(1, np.int32), 0, 0, 1]
    assert trie_walk_kernel._c_loop.walk_preorder(*args) == (1, 0, 0)  # noqa: SLF001
    args[0] = args[0].astype(np.int64)  # the table's dtype
    with pytest.raises(TypeError, match="argument 0"):
        trie_walk_kernel._c_loop.walk_preorder(*args)  # noqa: SLF001
    args[0] = np.zeros((256, 2), np.int32).T  # not C-contiguous
    with pytest.raises((TypeError, ValueError, BufferError)):
        trie_walk_kernel._c_loop.walk_preorder(*args)  # noqa: SLF001
