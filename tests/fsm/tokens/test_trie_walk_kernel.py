"""The whole-mask C call (``trie_walk_kernel.walk_mask``) gives, on random tries and automata,
the same bits, states and witness tokens as the numpy level walk (the reference) and as the
Python choices around ``walk_preorder`` calls it replaces: in states with few live first bytes
(only their subtrees walked), many (the whole trie) and most printable ones (the preset),
resuming at every missing row, and leaving the scratch flags clear."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import DEAD, LazyDFA
from radixlm.fsm.regex.parser import regex_to_node
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.fsm.tokens.state_loops import StateLoops
from radixlm.fsm.tokens.token_trie import SeenFlags, TokenTrie, TrieWalk

pytestmark = pytest.mark.skipif(not trie_walk_kernel.whole_mask_call(),
                                reason="the C trie walk is not built (python setup.py "
                                       "build_ext)")

# JSON-like punctuation and keys (few live bytes), words and digits (17-63: the whole trie, no
# preset), free and bounded strings (most printable bytes live: the preset), multi-byte
# characters (the subtree and counting skips' UTF-8 answers)
PATTERNS = [r'\{"(ab|abc|b)":[0-9]{1,3}(,"x":"[a-c]{0,3}")?\}', r"[a-z0-9 ]+,?",
            r'"[^"\\]*"', r'"[^"\\]{0,3}"', r"(é|ab|\{)*[ -~]?", r'[^"]{2}"(x|y)']
ALPHABET = b'"\\{}:,ab xyz09-\x7f' + "é😀".encode()
tokens = st.lists(st.one_of(st.none(), st.binary(min_size=0, max_size=5).map(
    lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b))), max_size=48)


def _walk(trie: TokenTrie, dfa: LazyDFA, state: int, num_words: int, whole: bool,
          seen: SeenFlags, loops: StateLoops) -> TrieWalk:
    method = trie._walk_whole if whole else trie._walk_native  # noqa: SLF001
    return method(lambda: dfa.trans, state, dfa.ensure_rows, lambda: dfa.built, num_words,
                  seen, loops)


@settings(max_examples=120, deadline=None)
@given(tokens, st.sampled_from(PATTERNS), st.lists(st.integers(0, 255), max_size=4),
       st.booleans())
def test_whole_mask_call_equals_the_reference_walks(token_bytes, pattern, path,  # noqa: ANN001
                                                    whole_first: bool) -> None:
    trie_walk_kernel.warm()
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    state = dfa.walk(dfa.initial, bytes(ALPHABET[b % len(ALPHABET)] for b in path))
    if state == DEAD:
        state = dfa.initial
    trie = TokenTrie(token_bytes)
    num_words = (len(token_bytes) + 31) // 32 or 1
    seen, loops = SeenFlags(), StateLoops()
    # whichever runs first meets the missing rows (the other walks built ones)
    order = [True, False] if whole_first else [False, True]
    walks = {whole: _walk(trie, dfa, state, num_words, whole, seen, loops) for whole in order}
    assert not seen.flags[1:].any(), "flags cleared for the next walk"
    ids, states = trie.walk_pairs(lambda: dfa.trans, state, dfa.ensure_rows)
    bits = np.zeros(32 * num_words, dtype=bool)
    bits[ids] = True
    for walk in walks.values():
        assert np.array_equal(np.unpackbits(walk.words.view(np.uint8), bitorder="little"),
                              bits)
        assert walk.states.tolist() == sorted(set(states.tolist()))
        for s, t in zip(walk.states.tolist(), walk.tokens.tolist(), strict=True):
            assert dfa.walk(state, token_bytes[t]) == s
    whole, parts = walks[True], walks[False]
    assert np.array_equal(whole.tokens, parts.tokens), "the same witness per state"
    looping = int(np.count_nonzero(dfa.trans[state] == state))
    for limit in (looping, looping + 1):  # not walked from the limit on; else the same walk
        for built in ((lambda: dfa.built), None):  # the C call, numpy's walk
            walk = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, num_words, built,
                             seen, loops, looping_limit=limit)
            assert (walk is None) == (limit == looping)
            assert walk is None or np.array_equal(walk.words, whole.words)


def _args(trie: TokenTrie, dfa: LazyDFA, state: int, roots: np.ndarray) -> list:
    loops, num_words = StateLoops(), 1
    words = np.zeros(num_words + 1, dtype=np.uint32)
    succ = np.zeros((2, max(trie.num_tokens, 1)), dtype=np.int32)
    stack = np.zeros((2, trie.depth + 1), dtype=np.int32)
    return [dfa.trans, dfa.built, 0, stack[0], *trie._walk_arrays,  # noqa: SLF001
            *loops.at_least(dfa.trans.shape[0]), *loops.steps_at_least(dfa.trans.shape[0]),
            stack[1], words, SeenFlags().at_least(dfa.trans.shape[0]), succ[0], succ[1], 0,
            roots, words.copy(), state, 64, 16, 257]


def test_whole_mask_call_asks_for_the_start_row_leaves_looping_states_refuses_bad_args() -> None:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(r'\{"a":1\}')))
    trie = TokenTrie([b'{"', b"a", b'":', b"1}"])
    roots = trie._roots  # noqa: SLF001
    args = _args(trie, dfa, dfa.initial, roots)
    assert trie_walk_kernel.walk_mask(*args) == (0, 0, dfa.initial)  # its row first
    dfa.ensure_rows(np.array([dfa.initial]))
    args = _args(trie, dfa, dfa.initial, roots)
    while True:  # the row after "{" next (the walk descends to '"')
        args[2], args[31], missing = trie_walk_kernel.walk_mask(*args)
        if not missing:
            break
        dfa.ensure_rows(np.array([missing]))
    assert args[31] == 1 and args[30][0] == 0 and args[27][0] == 1  # only token 0, '{"'
    args = _args(trie, dfa, dfa.initial, roots)
    args[-1] = 255  # the initial state loops on no byte: walked under any limit above 0
    assert trie_walk_kernel.walk_mask(*args)[2] >= 0
    args = _args(trie, dfa, dfa.initial, roots)
    args[-1] = 0  # at least no byte loops: not walked, nothing done
    assert trie_walk_kernel.walk_mask(*args) == (0, 0, -1) and not args[27].any()
    with pytest.raises(TypeError, match="roots must be int32"):
        trie_walk_kernel.walk_mask(*_args(trie, dfa, dfa.initial, roots[:10]))
    with pytest.raises(ValueError, match="is not a state of the table"):
        trie_walk_kernel.walk_mask(*_args(trie, dfa, dfa.trans.shape[0], roots))
