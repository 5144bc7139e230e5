"""Lazy DFA: rows built on demand, dead state, state budget."""

from __future__ import annotations

import pytest

from radixlm.fsm import GrammarBudgetError, GrammarError
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import DEAD, LazyDFA, check_satisfiable
from radixlm.fsm.regex import tree as ra
from radixlm.fsm.regex.parser import regex_to_node


def test_rows_are_built_lazily() -> None:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node("[a-z]{0,5000}")))
    assert dfa.num_states == 2  # dead + initial
    assert dfa.matches(b"abc")
    assert dfa.num_states < 10
    assert not dfa.matches(b"ab1")


def test_matches_a_string_that_grows_the_table() -> None:
    # the walk adds states past the initial 64-row table: acceptance is read from the grown
    # one (reading the table before the walk raised IndexError)
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node("[a-z]{100}")))
    assert dfa.matches(b"a" * 100)
    assert dfa.num_states > 64
    assert not dfa.matches(b"a" * 99)


def test_dead_state_absorbs() -> None:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(ra.lit("ab")))
    assert dfa.step(dfa.initial, ord("x")) == DEAD
    assert (dfa.row(DEAD) == DEAD).all()


def test_state_budget() -> None:
    builder = TermBuilder()
    dfa = LazyDFA(builder, builder.lower(regex_to_node("[a-z]{100}")), max_states=20)
    with pytest.raises(GrammarBudgetError, match="states"):
        dfa.walk(dfa.initial, b"a" * 50)


def test_unsatisfiable_grammar() -> None:
    builder = TermBuilder()
    empty = builder.and_([builder.lower(ra.lit("a")), builder.lower(ra.lit("b"))])
    with pytest.raises(GrammarError, match="matches no string"):
        check_satisfiable(LazyDFA(builder, empty))
