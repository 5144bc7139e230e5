"""Checks of the token trie walk for the tests: each preorder node's bytes, and a compiled walk
compared bit for bit with the plain numpy walk and with every token walked on its own."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from ..fsm.automaton.lazy_dfa import DEAD, LazyDFA
from ..fsm.tokens.state_loops import StateLoops
from ..fsm.tokens.token_trie import SeenFlags, TokenTrie


def node_prefixes(trie: TokenTrie) -> Iterator[tuple[int, bytes, bytes]]:
    """(preorder index, the node's parent's bytes, the node's own byte) for every node."""
    byte, depth, *_ = trie.preorder
    prefix: list[bytes] = []
    for i in range(byte.size):
        del prefix[depth[i] - 1:]
        prefix.append(bytes([byte[i]]))
        yield i, b"".join(prefix[:-1]), prefix[-1]


def assert_walk_exact(trie: TokenTrie, dfa: LazyDFA, token_bytes: Sequence[bytes | None],
                      start: int, loops: StateLoops) -> None:
    """The compiled walk from ``start`` (its subtree skips answered from ``loops``) gives the
    numpy walk's tokens and states, each token's own walk's verdict, and a token reaching
    each state it lists."""
    num_words = (len(token_bytes) + 31) // 32 or 1
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
        assert expected[t] == s
