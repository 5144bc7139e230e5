"""Singular paths: forced text from a state; final states and branch points never jump."""

from __future__ import annotations

import pytest

from radixlm.fsm.automaton.compressed_fsm import CompressedFSM, _char_boundary
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import LazyDFA
from radixlm.fsm.regex.parser import regex_to_node


def _fsm(pattern: str) -> tuple[LazyDFA, CompressedFSM]:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node(pattern)))
    return dfa, CompressedFSM(dfa)


@pytest.mark.parametrize("pattern, prefix, jump", [
    ('\\{"name":"[a-z]+","age":[0-9]+\\}', b"", '{"name":"'),
    ('\\{"name":"[a-z]+","age":[0-9]+\\}', b'{"name":"ab', ""),  # branch: letter or quote
    ('\\{"name":"[a-z]+","age":[0-9]+\\}', b'{"name":"ab"', ',"age":'),
    ("abc|abd", b"", "ab"),
    ("ab(c)?", b"ab", ""),  # accepting: the model may stop here
    ("héllo", b"h", "éllo"),
    ("h😀!", b"h\xf0\x9f", ""),  # inside a character: no jump
    ("(ab)*", b"", ""),
])
def test_jump_strings(pattern: str, prefix: bytes, jump: str) -> None:
    dfa, fsm = _fsm(pattern)
    state = dfa.walk(dfa.initial, prefix)
    assert fsm.jump_string(state) == jump
    data, after = fsm.run(state)
    assert dfa.walk(state, data) == after


def test_runs_stop_at_branches_not_inside_characters() -> None:
    dfa, fsm = _fsm("x(é|è)")  # é = C3 A9, è = C3 A8: the lead byte is forced, not the char
    assert fsm.jump_string(dfa.initial) == "x"


@pytest.mark.parametrize("data, cut", [(b"abc", 3), (b"a\xc3", 1), (b"a\xc3\xa9", 3),
                                       (b"\xa9bc", 0), (b"\xe2\x82", 0), (b"ab\xe2\x82", 2),
                                       (b"\xf0\x9f\x98\x80", 4)])
def test_char_boundary(data: bytes, cut: int) -> None:
    assert _char_boundary(data) == cut
