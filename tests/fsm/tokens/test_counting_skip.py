"""The trie walk's counting skip (states where every character moves state k to one same state
k + 1: bounded strings, counted repetitions; :mod:`radixlm.fsm.tokens.trie_walk_kernel`) gives
bit for bit the plain numpy walk's tokens and states, and each token's own walk, on random
vocabularies with multi-byte and cut characters, at odd sizes, with the C loop and numba's."""

from __future__ import annotations

import importlib.util
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import DEAD, LazyDFA
from radixlm.fsm.regex.parser import regex_to_node
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.fsm.tokens.state_loops import NO, UTF8_UNKNOWN, YES, StateLoops, utf8_target
from radixlm.fsm.tokens.token_trie import SeenFlags, TokenTrie
from radixlm.testing.trie_walks import assert_walk_exact

# pieces of text: ASCII letters, digits, space, a quote, whole 2-, 3- and 4-byte characters
PIECES = [b"a", b"b", b"7", b" ", b'"', "é".encode(), "日".encode(), "😀".encode()]
# bounded strings (maxLength / minLength), counted repetitions, one where a multi-byte
# character leads elsewhere than an ASCII one, a digit count, an enum, non-ASCII only
PATTERNS = [r'"[^"\\\x00-\x1f]{0,5}"', r'"[^"\\\x00-\x1f]{3,}"', r'"[a-z é]{2,7}"',
            r'(ab|é){0,4}x', r'"([a-z ]|é[a-z]){0,4}"', r'[0-9]{1,3}', r'"(alpha|beta|日本)"',
            r'"[^"a-z]{1,4}"', r'"(日|😀){0,6}"', r'"[^"\\\x00-\x1f]{2,3}[0-9]{0,2}"']

# which loops to compare with numpy's walk: the C one where built, numba's where installed
LOOPS = [pytest.param("c", marks=pytest.mark.skipif(
             trie_walk_kernel._c_loop is None,  # noqa: SLF001
             reason="the C trie walk is not built (python setup.py build_ext)")),
         pytest.param("numba", marks=pytest.mark.skipif(
             importlib.util.find_spec("numba") is None, reason="numba is not installed"))]


def _token(parts: list[int], cut: tuple[int, int]) -> bytes:
    """Pieces joined, then cut to a slice (so tokens may start or end inside a character)."""
    data = b"".join(PIECES[p] for p in parts)
    return data[cut[0]:len(data) - cut[1]]


# odd sizes: up to 70 tokens (num_words 1-3, a partial last word), some without bytes
tokens = st.lists(st.one_of(st.none(), st.builds(
    _token, st.lists(st.integers(0, len(PIECES) - 1), min_size=1, max_size=7),
    st.tuples(st.sampled_from([0, 0, 0, 1]), st.sampled_from([0, 0, 0, 1])))), max_size=70)


def _starts(dfa: LazyDFA, path: list[bytes]) -> list[int]:
    """The states along ``path`` from the start (live ones), the start first."""
    states, state = [dfa.initial], dfa.initial
    for piece in path:
        state = dfa.walk(state, piece)
        if state == DEAD:
            break
        states.append(state)
    return states


@pytest.mark.parametrize("loop", LOOPS)
@settings(max_examples=150, deadline=None)
@given(tokens, st.sampled_from(PATTERNS), st.lists(st.sampled_from(PIECES), max_size=4))
def test_counting_walk_equals_numpy_and_per_token_walks(loop: str, token_bytes, pattern,  # noqa: ANN001
                                                        path) -> None:  # noqa: ANN001
    c_loop = trie_walk_kernel._c_loop if loop == "c" else None  # noqa: SLF001
    with mock.patch.object(trie_walk_kernel, "_c_loop", c_loop):
        trie_walk_kernel.warm()
        builder = TermBuilder()
        dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
        trie = TokenTrie(token_bytes)
        loops = StateLoops()  # kept across the walks, as a TokenIndex keeps it
        starts = _starts(dfa, [b'"', *path])
        for start in starts + starts[::-1]:  # fresh answers, then kept ones
            assert_walk_exact(trie, dfa, token_bytes, start, loops)
        _assert_answers_exact(dfa, loops)


def _assert_answers_exact(dfa: LazyDFA, loops: StateLoops) -> None:
    """Where the walk answered where multi-byte characters lead, Python's check agrees."""
    for state in np.flatnonzero(loops.utf8_to[: dfa.num_states] != UTF8_UNKNOWN).tolist():
        target = utf8_target(state, lambda: dfa.trans, dfa.ensure_rows)
        assert loops.utf8_to[state] == target
        assert loops.utf8[state] == (YES if target == state else NO)


@pytest.mark.parametrize("loop", LOOPS)
def test_a_bounded_string_subtree_is_counted(loop: str) -> None:
    """Tokens of 1-4 letters and a few 2-3 character non-ASCII ones under a string of at
    most 3 characters: the walk takes the counting skip (the chain's states get their step
    answers) and refuses exactly the tokens too long for what is left."""
    letters = [bytes([c]) for c in range(97, 101)]
    words = [a + b for a in letters for b in letters]
    token_bytes = [None, b'"', *letters, *words, *(w + b"c" for w in words),
                   *(w + b"cd" for w in words), "é日".encode(), "日本語".encode(), b"a\xc3"]
    c_loop = trie_walk_kernel._c_loop if loop == "c" else None  # noqa: SLF001
    with mock.patch.object(trie_walk_kernel, "_c_loop", c_loop):
        trie_walk_kernel.warm()
        builder = TermBuilder()
        dfa = LazyDFA(builder, builder.lower(regex_to_node(r'"[^"\\\x00-\x1f]{0,3}"')))
        trie = TokenTrie(token_bytes)
        loops = StateLoops()
        start = dfa.walk(dfa.initial, b'"')
        assert_walk_exact(trie, dfa, token_bytes, start, loops)
        assert loops.step_known[start] == 1, "the chain was built from the string's start"
        assert loops.utf8_to[start] != UTF8_UNKNOWN, "and its multi-byte answer"
        _assert_answers_exact(dfa, loops)
        num_words = (len(token_bytes) + 31) // 32
        walk = trie.walk(lambda: dfa.trans, start, dfa.ensure_rows, num_words,
                         lambda: dfa.built, SeenFlags(), loops)
        bits = np.unpackbits(walk.words.view(np.uint8), bitorder="little")
        allowed = {token_bytes[t] for t in np.flatnonzero(bits).tolist()}
        assert allowed == {b'"', *letters, *words, *(w + b"c" for w in words),
                           "é日".encode(), "日本語".encode(), b"a\xc3"}  # cut: still live
