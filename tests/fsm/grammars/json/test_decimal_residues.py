"""The residue automaton of decimal multiples: exact against Fraction arithmetic, every state it
returns live (the :class:`AsciiMachine` contract the derivative terms rely on), and its
byte classes consistent with its steps."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.grammars.json.decimal_residues import (
    DecimalMultiples,
    IntegerResidues,
    decimal_multiples,
    integer_residues,
)

_ALPHABET = b"0123456789."


def _machines() -> st.SearchStrategy[DecimalMultiples]:
    integer = st.builds(DecimalMultiples, st.integers(1, 400), st.just(0), st.just(False))
    decimal = st.builds(DecimalMultiples, st.integers(1, 400), st.integers(0, 3), st.just(True))
    return st.one_of(integer, decimal)


def _states(machine: DecimalMultiples | IntegerResidues) -> list:
    seen, order = {machine.start}, [machine.start]
    for u in order:
        for byte in _ALPHABET:
            v = machine.step(u, byte)
            if v is not None and v not in seen:
                seen.add(v)
                order.append(v)
    return order


def _live(machine: DecimalMultiples | IntegerResidues, states: list) -> set:
    live = {s for s in states if machine.accepting(s)}
    changed = True
    while changed:  # backwards closure: a state with a live successor is live
        changed = False
        for s in states:
            if s not in live and any(machine.step(s, b) in live for b in _ALPHABET):
                live.add(s)
                changed = True
    return live


@settings(max_examples=60, deadline=None)
@given(machine=_machines())
def test_every_reachable_state_is_live(machine: DecimalMultiples) -> None:
    states = _states(machine)
    assert _live(machine, states) == set(states)
    assert len(states) <= machine.m * (machine.s + 3) + 2  # S, Z, I(r), D(r), F(r, 0..s)


@settings(max_examples=60, deadline=None)
@given(machine=_machines(), byte=st.integers(0, 255))
def test_classes_partition_bytes_by_successor(machine: DecimalMultiples, byte: int) -> None:
    for state in _states(machine)[:50]:
        classes = machine.classes(state)
        assert sum(classes) == (1 << 256) - 1 and all(a & b == 0 for a in classes
                                                         for b in classes if a is not b)
        mine = next(c for c in classes if c >> byte & 1)
        other = (mine & -mine).bit_length() - 1
        assert machine.step(state, byte) == machine.step(state, other)


@settings(max_examples=300, deadline=None)
@given(m=st.integers(1, 2000), s=st.integers(0, 4),
       text=st.from_regex(r"(0|[1-9][0-9]{0,8})(\.[0-9]{1,6})?", fullmatch=True))
def test_terms_match_exact_multiples(m: int, s: int, text: str) -> None:
    builder = TermBuilder()
    term = builder.lower(decimal_multiples(m, s, fraction=True))
    exact = (Fraction(text) / Fraction(m, 10 ** s)).denominator == 1
    assert builder.matches(term, text.encode()) == exact


def _residue_machines() -> st.SearchStrategy[IntegerResidues]:
    def build(k: int, not_k: list[int]) -> IntegerResidues:
        return IntegerResidues(math.lcm(k, *not_k), k, tuple(not_k))
    machines = st.builds(build, st.integers(1, 60), st.lists(st.integers(2, 60), max_size=3))
    return machines.filter(lambda m: any(m.accepts_residue(r) for r in range(m.modulus)))


@settings(max_examples=60, deadline=None)
@given(machine=_residue_machines())
def test_every_reachable_residue_state_is_live(machine: IntegerResidues) -> None:
    states = _states(machine)
    assert _live(machine, states) == set(states)
    assert len(states) <= machine.modulus + 2  # S, Z, I(r)


@settings(max_examples=200, deadline=None)
@given(k=st.integers(1, 60), not_k=st.lists(st.integers(1, 60), max_size=3),
       n=st.integers(0, 10**7))
def test_integer_residues_match_exactly(k: int, not_k: list[int], n: int) -> None:
    node = integer_residues(k, tuple(not_k), math.lcm(k, *not_k))
    builder = TermBuilder()
    want = n % k == 0 and all(n % m for m in not_k)
    assert builder.matches(builder.lower(node), str(n).encode()) == want
