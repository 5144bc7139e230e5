"""Digit regexes for bounds and divisors decide the same as exact arithmetic."""

from __future__ import annotations

import re
from decimal import Decimal

from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.grammars.json import number_ranges as nr
from radixlm.fsm.regex import tree as ra

decimals = st.decimals(min_value=-5000, max_value=5000, places=3, allow_nan=False,
                       allow_infinity=False).map(lambda d: d.normalize() if d else Decimal(0))
plain_numbers = st.builds(
    lambda sign, whole, frac: f"{sign}{whole}{'.' + frac if frac else ''}",
    st.sampled_from(["", "-"]), st.integers(0, 6000), st.text("0123456789", max_size=4))


def _accepts(node: ra.Node, text: str) -> bool:
    builder = TermBuilder()
    got = builder.matches(builder.lower(node), text.encode())
    assert got == bool(re.fullmatch(ra.render(node), text)), (ra.render(node), text)
    return got


@settings(max_examples=300, deadline=None)
@given(lo=st.none() | decimals, lo_strict=st.booleans(), hi=st.none() | decimals,
       hi_strict=st.booleans(), text=plain_numbers)
def test_decimal_range(lo, lo_strict, hi, hi_strict, text) -> None:  # noqa: ANN001
    node = nr.decimal_range(lo, lo_strict, hi, hi_strict)
    value = Decimal(text)
    want = (lo is None or (value > lo if lo_strict else value >= lo)) and \
        (hi is None or (value < hi if hi_strict else value <= hi))
    if node is ra.EMPTY:
        assert not want
    else:
        assert _accepts(node, text) == want


@settings(max_examples=300, deadline=None)
@given(lo=st.none() | st.integers(-3000, 3000), hi=st.none() | st.integers(-3000, 3000),
       value=st.integers(-4000, 4000))
def test_int_range(lo, hi, value) -> None:  # noqa: ANN001
    node = nr.int_range(lo, hi)
    want = (lo is None or value >= lo) and (hi is None or value <= hi)
    if node is ra.EMPTY:
        assert lo is not None and hi is not None and lo > hi
    else:
        assert _accepts(node, str(value)) == want
        assert not _accepts(node, "0" + str(abs(value)) if value else "00")


@settings(max_examples=100, deadline=None)
@given(k=st.sampled_from([1, 2, 4, 5, 8, 10, 16, 20, 25, 40, 125, 250]),
       value=st.integers(0, 100_000))
def test_multiples_by_last_digits(k: int, value: int) -> None:
    assert _accepts(nr.nat_multiple_of(k), str(value)) == (value % k == 0)


def test_other_divisors_have_no_digit_rule() -> None:
    assert nr.nat_multiple_of(3) is None and nr.nat_multiple_of(7) is None
    assert nr.decimal_suffix_modulus(50) == 2
