r"""Per-state token masks equal outlines-core's Index over the same vocabulary (oracle).

One known outlines-core 0.2.14 defect is accounted for: in accepting states its Index drops
every token that leads to a non-accepting state (for ``1(\.5)?`` it refuses ``.`` after
``1``), so there we check that our extra tokens are exactly those.
"""

from __future__ import annotations

import random

import numpy as np
import outlines_core
import pytest

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import DEAD, LazyDFA
from radixlm.fsm.regex import tree as ra
from radixlm.fsm.regex.parser import regex_to_node
from radixlm.fsm.tokens.token_index import TokenIndex

REGEXES = [
    r'\{ ?"name" ?: ?"([^"\\\x00-\x1f]|\\["\\/bfnrt])*" ?, ?"age" ?: ?-?(0|[1-9][0-9]*) ?\}',
    r"(cat|dog|horse)s?",
    r"[a-zé😀]{1,5}",
    r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?",
    r"[0-9a-f]{8}-[0-9a-f]{4}",
    r"(ab|abc|abcd)*x",
]


def _allowed(mask, vocab_size: int) -> set[int]:
    bits = np.unpackbits(mask.numpy().view(np.uint8), bitorder="little")[:vocab_size]
    return set(np.flatnonzero(bits).tolist())


@pytest.mark.parametrize("pattern", REGEXES)
def test_masks_match_outlines_core_index(vocab, pattern: str) -> None:  # noqa: ANN001
    mapping: dict[bytes, list[int]] = {}
    for tid, data in enumerate(vocab.token_bytes):
        if data:
            mapping.setdefault(data, []).append(tid)
    oracle = outlines_core.Index(pattern, outlines_core.Vocabulary(1, mapping))
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    index = TokenIndex(dfa, vocab)
    rng = random.Random(len(pattern))
    for _ in range(12):
        ours, theirs = dfa.initial, oracle.get_initial_state()
        for _ in range(25):
            allowed = _allowed(index.mask(ours), vocab.vocab_size)
            expected = set(oracle.get_allowed_tokens(theirs) or [])
            if dfa.accepting[ours]:
                expected |= {4}  # every EOS id of the model, not just outlines' single one
                extra = allowed - expected
                assert expected <= allowed
                assert all(not dfa.accepting[index.next_state(ours, t)] for t in extra)
                allowed -= extra
            assert allowed == expected
            text = sorted(allowed - {1, 4})
            if not text:
                break
            token = rng.choice(text)
            ours = index.next_state(ours, token)
            theirs = oracle.get_next_state(theirs, token)
            assert ours != DEAD and theirs is not None


def test_special_and_padding_ids_never_advance(vocab) -> None:  # noqa: ANN001
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(ra.star(ra.chars([(0, 0x10FFFF)]))))
    index = TokenIndex(dfa, vocab)
    assert all(index.next_state(dfa.initial, t) == DEAD for t in (0, 1, 2, 3, 4, 8191, 9000))
    allowed = _allowed(index.mask(dfa.initial), vocab.vocab_size)
    assert not allowed & {0, 2, 3} and allowed >= {1, 4}  # EOS allowed: the state accepts


def test_successors_name_a_token_for_each_state(vocab) -> None:  # noqa: ANN001
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node("(ab|cd)e")))
    index = TokenIndex(dfa, vocab)
    states, tokens = index.successors(dfa.initial)
    for state, token in zip(states.tolist(), tokens.tolist(), strict=True):
        assert index.next_state(dfa.initial, token) == state
