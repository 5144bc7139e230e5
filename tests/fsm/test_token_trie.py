"""The token trie walk equals walking every token's bytes through the DFA on its own."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import trie_walk_kernel
from radixlm.fsm.derivatives import TermBuilder
from radixlm.fsm.lazy_dfa import DEAD, LazyDFA
from radixlm.fsm.regex_parser import regex_to_node
from radixlm.fsm.token_trie import TokenTrie

PATTERNS = [r"(ab|abc|b)*c?", r'"[a-c]{0,3}"', r"a+b+|ba", r"[^a]*a"]
tokens = st.lists(st.one_of(st.none(), st.binary(min_size=0, max_size=5).map(
    lambda b: bytes(x % 4 + ord("a") if x % 5 else ord('"') for x in b))), max_size=40)


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
    ids, states = trie.walk(lambda: dfa.trans, state, dfa.ensure_rows, built)
    got = dict(zip(ids.tolist(), states.tolist(), strict=True))
    expected = {t: dfa.walk(state, b) for t, b in enumerate(token_bytes) if b}
    assert got == {t: s for t, s in expected.items() if s != DEAD}
    assert len(ids) == len(got)  # each token once
    assert trie.num_nodes == len({b[:i] for b in token_bytes if b for i in range(1, len(b) + 1)})


@pytest.mark.skipif(not trie_walk_kernel.AVAILABLE, reason="numba is not installed")
@settings(max_examples=40, deadline=None)
@given(tokens, st.sampled_from(PATTERNS))
def test_the_compiled_loop_asks_for_exactly_the_rowless_states_of_its_frontier(
        token_bytes, pattern) -> None:  # noqa: ANN001
    """Each stop of the loop names the states it needs rows for: distinct, ascending, every
    one without a row, and every rowless state of the frontier among them."""
    trie_walk_kernel.warm()
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    trie = TokenTrie(token_bytes)
    asked: list[list[int]] = []

    def ensure_rows(missing) -> None:  # noqa: ANN001
        states = missing.tolist()
        assert states == sorted(set(states)), "distinct and ascending"
        assert not dfa.built[missing].any(), "only states without a row"
        asked.append(states)
        dfa.ensure_rows(missing)

    ids, states = trie.walk(lambda: dfa.trans, dfa.initial, ensure_rows, lambda: dfa.built)
    expected = {t: dfa.walk(dfa.initial, b) for t, b in enumerate(token_bytes) if b}
    assert dict(zip(ids.tolist(), states.tolist(), strict=True)) == \
        {t: s for t, s in expected.items() if s != DEAD}
    if any(token_bytes):
        assert asked[0] == [dfa.initial], "the first stop: the start state's row"
