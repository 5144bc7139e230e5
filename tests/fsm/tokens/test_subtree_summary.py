"""Subtree summaries: each node's fields equal what its subtree holds, and the compiled walk
that skips looping subtrees gives the numpy walk's (and each token's own) masks and states on
text with multi-byte characters, cut ones included."""

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
from radixlm.fsm.tokens.subtree_summary import NON_ASCII, WHOLE_CHARS, whole_chars_from
from radixlm.fsm.tokens.token_trie import SeenFlags, TokenTrie

# pieces of text: ASCII, the JSON string's specials, whole 2-, 3- and 4-byte characters
PIECES = [b"a", b"b", b" ", b'"', b"\\", b"\n", "é".encode(), "日".encode(), "😀".encode()]
# a JSON string's body, a string of letters, one without "é", a string of lowercase+space
PATTERNS = [r'"([^"\\\x00-\x1f]|\\["\\nt])*"', r'"[a-b ]*"', r'"[^é"]*"', r"[ab é日]*x"]


def _token(parts: list[int], cut: tuple[int, int]) -> bytes:
    """Pieces joined, then cut to a slice (so tokens may start or end inside a character)."""
    data = b"".join(PIECES[p] for p in parts)
    return data[cut[0]:len(data) - cut[1]]


tokens = st.lists(st.one_of(st.none(), st.builds(
    _token, st.lists(st.integers(0, len(PIECES) - 1), max_size=5),
    st.tuples(st.sampled_from([0, 0, 0, 1]), st.sampled_from([0, 0, 0, 1])))), max_size=48)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=10))
def test_whole_chars_is_the_strict_decoder(data: bytes) -> None:
    cols = np.frombuffer(data, dtype=np.uint8).astype(np.int16).reshape(1, -1)
    ok = whole_chars_from(cols)[0]
    for k in range(len(data) + 1):
        try:
            data[k:].decode("utf-8")
            expected = True
        except UnicodeDecodeError:
            expected = False
        assert ok[k] == expected, (data, k)


@settings(max_examples=80, deadline=None)
@given(tokens)
def test_each_node_summarizes_its_subtree(token_bytes) -> None:  # noqa: ANN001
    trie = TokenTrie(token_bytes)
    byte, depth, skip, *_ = trie.preorder
    summary = trie.summary
    prefix: list[bytes] = []
    for i in range(byte.size):
        del prefix[depth[i] - 1:]
        prefix.append(bytes([byte[i]]))
        start = b"".join(prefix[:-1])  # the node's parent's bytes
        here = start + prefix[-1]
        under = {t: b for t, b in enumerate(token_bytes) if b and b.startswith(here)}
        suffixes = [b[len(start):] for b in under.values()]
        used = set().union(*map(set, suffixes))
        bits = sum(1 << b for b in used if b < 0x80)
        assert int(summary.ascii_bytes[i, 0]) | int(summary.ascii_bytes[i, 1]) << 64 == bits
        assert bool(summary.flags[i] & NON_ASCII) == any(b >= 0x80 for b in used)
        whole = all(_decodes(s) for s in suffixes)
        assert bool(summary.flags[i] & WHOLE_CHARS) == whole
        ids = summary.tokens[summary.token_start[i]:summary.token_start[skip[i]]]
        assert sorted(ids.tolist()) == sorted(under)


def _decodes(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@pytest.mark.skipif(not trie_walk_kernel.AVAILABLE, reason="numba is not installed")
@settings(max_examples=120, deadline=None)
@given(tokens, st.sampled_from(PATTERNS), st.lists(st.sampled_from(PIECES), max_size=3))
def test_skipping_walk_equals_numpy_and_per_token_walks(token_bytes, pattern, path) -> None:  # noqa: ANN001
    trie_walk_kernel.warm()
    assert trie_walk_kernel.ready()
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    state = dfa.walk(dfa.initial, b'"' + b"".join(path))
    if state == DEAD:
        state = dfa.walk(dfa.initial, b'"')
    if state == DEAD:
        state = dfa.initial
    trie = TokenTrie(token_bytes)
    num_words = (len(token_bytes) + 31) // 32 or 1
    loops = StateLoops()  # kept across the walks, as a TokenIndex keeps it
    for start in (state, dfa.initial, state):
        native = trie.walk(lambda: dfa.trans, start, dfa.ensure_rows, num_words,
                           lambda: dfa.built, SeenFlags(), loops)
        plain = trie.walk(lambda: dfa.trans, start, dfa.ensure_rows, num_words, None)
        assert np.array_equal(native.words, plain.words)
        assert np.array_equal(native.states, plain.states)
        expected = {t: dfa.walk(start, b) for t, b in enumerate(token_bytes) if b}
        live = sorted(t for t, s in expected.items() if s != DEAD)
        bits = np.unpackbits(native.words.view(np.uint8), bitorder="little")
        assert np.flatnonzero(bits).tolist() == live
        for s, t in zip(native.states.tolist(), native.tokens.tolist(), strict=True):
            assert dfa.walk(start, token_bytes[t]) == s


def test_a_long_subtree_is_skipped_whole() -> None:
    """Many tokens under one prefix looping at the state: the walk gives the per-token mask."""
    trie_walk_kernel.warm()
    token_bytes = [None, b'"', *(b"a" + bytes([c, d]) for c in range(97, 123)
                                 for d in range(97, 123))]
    trie = TokenTrie(token_bytes)
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(r'"[a-z]*"')))
    state = dfa.walk(dfa.initial, b'"a')
    assert (dfa.row(state)[97:123] == state).all(), "a-z loop there: the subtree is skipped"
    num_words = (len(token_bytes) + 31) // 32
    built = (lambda: dfa.built) if trie_walk_kernel.AVAILABLE else None
    walk = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, num_words, built)
    bits = np.unpackbits(walk.words.view(np.uint8), bitorder="little")
    assert np.flatnonzero(bits).tolist() == list(range(1, len(token_bytes)))
    assert walk.states.tolist() == sorted({state, dfa.walk(state, b'"')})
