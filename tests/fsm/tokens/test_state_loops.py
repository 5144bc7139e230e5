"""Which states loop on every well-formed multi-byte UTF-8 character."""

from __future__ import annotations

import pytest

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import LazyDFA
from radixlm.fsm.regex.parser import regex_to_node
from radixlm.fsm.tokens.state_loops import NO, UNKNOWN, YES, StateLoops, utf8_loops

# one character of each encoded length and range edge (Unicode table 3-7's rows)
SAMPLES = ["\u0080", "é", "\u07ff", "\u0800", "日", "\ud7ff", "\ue000", "\uffff",
           "\U00010000", "😀", "\U0010ffff"]


@pytest.mark.parametrize(("pattern", "loops"), [
    (r'"[^"\\]*"', True),  # a JSON string's body: every character but two
    (r'"[^"é]*"', False),  # one 2-byte character missing
    (r'"[^"\U0010FFFF]*"', False),  # the last 4-byte character missing
    (r'"[a-z]*"', False),  # ASCII only
    (r'"(.|日日)*"', False),  # after 日 a second 日 may follow: another state
    (r'"(.|ab)*"', True),  # an ASCII detour does not matter
])
def test_utf8_loops(pattern: str, loops: bool) -> None:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    # two characters in (after '"' alone, a state each character leaves; derivatives settle)
    state = dfa.walk(dfa.initial, b'"bb')
    assert utf8_loops(state, lambda: dfa.trans, dfa.ensure_rows) is loops
    if loops:  # spot checks: each sample character leads back
        assert all(dfa.walk(state, c.encode()) == state for c in SAMPLES)


def test_answers_are_kept_and_grow() -> None:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(r'"[^"]*"|"a')))
    state = dfa.walk(dfa.initial, b'"b')
    table = StateLoops()
    assert table.utf8[:4].tolist() == [UNKNOWN] * 4
    table.answer_utf8(state, lambda: dfa.trans, dfa.ensure_rows)
    table.answer_utf8(dfa.initial, lambda: dfa.trans, dfa.ensure_rows)
    known, ascii_, utf8 = table.at_least(1000)
    assert known.size >= 1000 and ascii_.shape == (known.size, 2)
    assert utf8[state] == YES and utf8[dfa.initial] == NO
