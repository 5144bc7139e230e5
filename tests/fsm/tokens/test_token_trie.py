"""The token trie walk equals walking every token's bytes through the DFA on its own."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import DEAD, LazyDFA
from radixlm.fsm.regex.parser import regex_to_node
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.fsm.tokens.token_trie import SeenFlags, TokenTrie, TrieWalk

PATTERNS = [r"(ab|abc|b)*c?", r'"[a-c]{0,3}"', r"a+b+|ba", r"[^a]*a"]
tokens = st.lists(st.one_of(st.none(), st.binary(min_size=0, max_size=5).map(
    lambda b: bytes(x % 4 + ord("a") if x % 5 else ord('"') for x in b))), max_size=40)


def _expected(dfa: LazyDFA, state: int, token_bytes) -> dict[int, int]:  # noqa: ANN001
    """token id -> the live state its bytes lead to, each token walked on its own."""
    walked = {t: dfa.walk(state, b) for t, b in enumerate(token_bytes) if b}
    return {t: s for t, s in walked.items() if s != DEAD}


def _check_walk(walk: TrieWalk, expected: dict[int, int], token_bytes, dfa, state) -> None:  # noqa: ANN001
    """The walk's bits are exactly the expected tokens, its states exactly the distinct
    states they reach (ascending), and each state's token really leads there."""
    bits = np.unpackbits(walk.words.view(np.uint8), bitorder="little")
    assert np.flatnonzero(bits).tolist() == sorted(expected)
    assert walk.states.tolist() == sorted(set(expected.values()))
    for s, t in zip(walk.states.tolist(), walk.tokens.tolist(), strict=True):
        assert dfa.walk(state, token_bytes[t]) == s


@pytest.mark.parametrize("native", [
    pytest.param(True, marks=pytest.mark.skipif(not trie_walk_kernel.AVAILABLE,
                                                reason="numba is not installed")),
    False], ids=["compiled loop", "numpy levels"])
@settings(max_examples=60, deadline=None)
@given(tokens, st.sampled_from(PATTERNS), st.lists(st.integers(0, 255), max_size=4))
def test_trie_walk_equals_per_token_walks(native, token_bytes, pattern, path) -> None:  # noqa: ANN001
    if native:
        trie_walk_kernel.warm()  # loaded (walks use numpy until it is)
        assert trie_walk_kernel.ready()
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    state = dfa.walk(dfa.initial, bytes(b % 4 + ord("a") for b in path))
    if state == DEAD:
        state = dfa.initial
    trie = TokenTrie(token_bytes)
    built = (lambda: dfa.built) if native else None
    num_words = (len(token_bytes) + 31) // 32 or 1
    walk = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, num_words, built)
    _check_walk(walk, _expected(dfa, state, token_bytes), token_bytes, dfa, state)
    assert trie.num_nodes == len({b[:i] for b in token_bytes if b for i in range(1, len(b) + 1)})


@pytest.mark.skipif(not trie_walk_kernel.AVAILABLE, reason="numba is not installed")
@settings(max_examples=40, deadline=None)
@given(tokens, st.sampled_from(PATTERNS))
def test_the_compiled_loop_asks_only_for_rows_it_descends_into(token_bytes, pattern) -> None:  # noqa: ANN001
    """Each stop of the loop names one state without a row, one the walk then descends
    into (a prefix of a longer token reaches it); the start state's row comes first; the
    scratch flags are clear again after the walk, also when it is run twice on them."""
    trie_walk_kernel.warm()
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    trie = TokenTrie(token_bytes)
    asked: list[int] = []
    prefixes = {b[:i] for b in token_bytes if b for i in range(1, len(b))}  # inner nodes
    inner_states = {dfa.walk(dfa.initial, p) for p in prefixes}

    def ensure_rows(missing) -> None:  # noqa: ANN001
        assert missing.size == 1 and not dfa.built[missing[0]], "one state without a row"
        asked.append(int(missing[0]))
        dfa.ensure_rows(missing)

    seen = SeenFlags()
    num_words = (len(token_bytes) + 31) // 32 or 1
    for _ in range(2):
        walk = trie.walk(lambda: dfa.trans, dfa.initial, ensure_rows, num_words,
                         lambda: dfa.built, seen)
        _check_walk(walk, _expected(dfa, dfa.initial, token_bytes), token_bytes, dfa,
                    dfa.initial)
        assert not seen.flags[1:].any(), "flags cleared for the next walk"
    assert set(asked[1:]) <= inner_states, "only rows of states the walk descends into"
    if asked:
        assert asked[0] == dfa.initial or dfa.built[dfa.initial]


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=6).map(
    lambda b: bytes(x % 3 * 127 for x in b))), max_size=40))  # 0x00, 0x7f and 0xfe: ends
def test_levels_are_the_sorted_distinct_prefixes(token_bytes) -> None:  # noqa: ANN001
    """Level d holds the distinct d-byte prefixes, sorted; each node's parent and byte are
    its prefix and last byte; each token ends at its own node, ids ascending per level."""
    trie = TokenTrie(token_bytes)
    texts = {b for b in token_bytes if b}
    assert trie.depth == max(map(len, texts), default=0)
    levels = [[b""]] + [sorted({b[:d] for b in texts if len(b) >= d})
                        for d in range(1, trie.depth + 1)]
    assert trie.sizes == [len(level) for level in levels]
    for d in range(1, trie.depth + 1):
        assert [levels[d - 1][p] for p in trie.parent[d]] == [b[:-1] for b in levels[d]]
        assert trie.byte[d].tolist() == [b[-1] for b in levels[d]]
        ids = [t for t, b in enumerate(token_bytes) if b and len(b) == d]
        assert trie.end_token[d].tolist() == ids
        assert [levels[d][n] for n in trie.end_node[d]] == [token_bytes[t] for t in ids]
        count = trie.child_count[d - 1]
        assert count.sum() == trie.sizes[d] and trie.child_start[d - 1].tolist() == \
            (np.cumsum(count) - count).tolist()
