"""multipleOf with decimal divisors, exact on the decimal text (generated numbers accepted iff
the exact quotient is an integer), the divisors that are refused by name, and the lcm."""

from __future__ import annotations

from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import GrammarError
from radixlm.fsm.derivatives import TermBuilder
from radixlm.fsm.json import JsonSchemaOptions, json_schema_to_node
from radixlm.fsm.json.multiples import decimal_lcm, integer_divisor

DIVISORS = ["0.01", "0.5", "2.5", "0.25", "0.001", "5e-2", "0.125", "12.5", "0.04", "1e-3"]


def _matcher(schema: dict):  # noqa: ANN202
    node, _ = json_schema_to_node(schema, JsonSchemaOptions())
    builder = TermBuilder()
    term = builder.lower(node)
    return lambda text: builder.matches(term, text.encode())


def _plain_decimals() -> st.SearchStrategy[str]:
    nat = st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,5}", fullmatch=True))
    frac = st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,6}", fullmatch=True))
    return st.tuples(st.sampled_from(["", "-"]), nat, frac).map("".join)


_MATCHERS = {d: _matcher({"type": "number", "multipleOf": float(d)}) for d in DIVISORS}


@settings(max_examples=300, deadline=None)
@given(d=st.sampled_from(DIVISORS), text=_plain_decimals())
def test_decimal_divisor_exact(d: str, text: str) -> None:
    exact = (Fraction(text) / Fraction(d)).denominator == 1
    assert _MATCHERS[d](text) == exact, (d, text)


@pytest.mark.parametrize("d", ["0.01", "0.5", "2.5"])
def test_exponent_spellings_not_produced(d: str) -> None:
    assert not _MATCHERS[d]("1e2") and _MATCHERS[d]("100")


def test_agrees_with_jsonschema_where_floats_are_exact(check_schema) -> None:  # noqa: ANN001
    check_schema({"type": "number", "multipleOf": 0.5}, ["1.5", "-2", "0", "3.50", "4.0"],
                 ["0.3", "1.25", "7.1"])
    check_schema({"type": "integer", "multipleOf": 2.5}, ["5", "10", "-15", "0"],
                 ["2", "7", "2.5"])
    check_schema({"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 2},
                 ["1", "1.25", "2.00"], ["0.75", "1.3", "2.25"])


@pytest.mark.parametrize("d", [0.3, 0.07, 1.1])
def test_non_suffix_decimal_divisor_refused_by_name(d: float) -> None:
    with pytest.raises(GrammarError, match="multipleOf"):
        json_schema_to_node({"type": "number", "multipleOf": d}, JsonSchemaOptions())


@given(a=st.integers(1, 400), sa=st.integers(0, 3), b=st.integers(1, 400), sb=st.integers(0, 3))
def test_decimal_lcm_divides_exactly(a: int, sa: int, b: int, sb: int) -> None:
    x, y = Decimal(a).scaleb(-sa), Decimal(b).scaleb(-sb)
    lcm = Fraction(str(decimal_lcm([x, y])))
    for v in (x, y):
        assert (lcm / Fraction(str(v))).denominator == 1
    # least: no smaller common multiple divides both
    for q in range(1, 8):
        smaller = lcm / (q + 1)
        assert not all((smaller / Fraction(str(v))).denominator == 1 for v in (x, y)) or \
            smaller == 0


@given(m=st.integers(1, 10_000), s=st.integers(0, 4), n=st.integers(-10_000, 10_000))
def test_integer_divisor_exact(m: int, s: int, n: int) -> None:
    d = Decimal(m).scaleb(-s)
    assert (n % integer_divisor(d) == 0) == ((Fraction(n) / Fraction(str(d))).denominator == 1)
