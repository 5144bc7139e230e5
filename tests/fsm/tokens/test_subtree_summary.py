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
from radixlm.fsm.tokens.token_trie import TokenTrie
from radixlm.testing.trie_walks import assert_walk_exact, node_prefixes

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
    skip = trie.preorder[2]
    summary = trie.summary
    for i, start, own in node_prefixes(trie):  # start: the node's parent's bytes
        here = start + own
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


def _begun(data: bytes) -> int:
    """Characters begun in ``data``: its bytes other than continuation bytes."""
    return sum(1 for b in data if not 0x80 <= b < 0xC0)


@settings(max_examples=80, deadline=None)
@given(tokens)
def test_each_node_counts_its_characters(token_bytes) -> None:  # noqa: ANN001
    """The counting skip's fields: characters begun before each node, the most by a token of
    its subtree (all of it, and up to its last multi-byte character), and per token."""
    trie = TokenTrie(token_bytes)
    summary = trie.summary
    for i, start, own in node_prefixes(trie):
        under = [b for b in token_bytes if b and b.startswith(start + own)]
        assert summary.chars_before[i] == _begun(start)
        assert summary.max_chars[i] == max(_begun(b) for b in under)
        last_wide = [max((k for k in range(len(b)) if b[k] >= 0x80), default=-1) for b in under]
        assert summary.wide_chars[i] == max(_begun(b[:k + 1]) if k >= 0 else 0
                                            for b, k in zip(under, last_wide, strict=True))
    ids = summary.tokens.tolist()
    assert summary.token_chars.tolist() == [_begun(token_bytes[t]) for t in ids]


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
    loops = StateLoops()  # kept across the walks, as a TokenIndex keeps it
    for start in (state, dfa.initial, state):
        assert_walk_exact(trie, dfa, token_bytes, start, loops)


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
