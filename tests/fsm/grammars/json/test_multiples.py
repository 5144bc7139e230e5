"""multipleOf with any decimal divisor, exact on the decimal text (generated numbers accepted
iff the exact quotient is an integer): last digits for 2^a·5^b, a residue automaton for every
other divisor (3, 7, 0.3, 0.07, ...), with bounds, on integers, negated; and the lcm."""

from __future__ import annotations

import functools
import math
from decimal import Decimal
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import GrammarError
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node, json_schema_to_regex
from radixlm.fsm.grammars.json.multiples import decimal_lcm, integer_divisor
from radixlm.fsm.regex import tree as ra

SUFFIX_DIVISORS = ["0.01", "0.5", "2.5", "0.25", "0.001", "5e-2", "0.125", "12.5", "0.04",
                   "1e-3"]
RESIDUE_DIVISORS = ["3", "7", "11", "12", "0.3", "0.07", "1.1", "0.375", "2.1", "1e-2", "97",
                    "0.003"]
DIVISORS = SUFFIX_DIVISORS + RESIDUE_DIVISORS


def _matcher(schema: dict):  # noqa: ANN202
    node, _ = json_schema_to_node(schema, JsonSchemaOptions())
    builder = TermBuilder()
    term = builder.lower(node)
    return lambda text: builder.matches(term, text.encode())


def _plain_decimals() -> st.SearchStrategy[str]:
    nat = st.one_of(st.just("0"), st.from_regex(r"[1-9][0-9]{0,5}", fullmatch=True))
    frac = st.one_of(st.just(""), st.from_regex(r"\.[0-9]{1,6}", fullmatch=True))
    # no negative zero: integer grammars spell canonical integers only (0, never -0)
    return st.tuples(st.sampled_from(["", "-"]), nat, frac).map("".join).map(
        lambda t: t[1:] if t.startswith("-") and Fraction(t) == 0 else t)


def _multiples_of(d: str) -> st.SearchStrategy[str]:
    """Exact multiples of ``d``, spelled with up to 3 extra fraction zeros (6.0, 4.50)."""
    def spell(q: int, zeros: int) -> str:
        value = Decimal(q) * Decimal(d)
        text = format(value, "f")
        text = text.rstrip("0").rstrip(".") if "." in text else text
        if zeros:
            text += ("" if "." in text else ".") + "0" * zeros
        return "0" + text[2:] if text.startswith("-0") and Decimal(text) == 0 else text
    return st.builds(spell, st.integers(-10**6, 10**6), st.integers(0, 3))


_MATCHERS = {d: _matcher({"type": "number", "multipleOf": float(d)}) for d in DIVISORS}


@settings(max_examples=400, deadline=None)
@given(d=st.sampled_from(DIVISORS), text=_plain_decimals())
def test_decimal_divisor_exact(d: str, text: str) -> None:
    exact = (Fraction(text) / Fraction(d)).denominator == 1
    assert _MATCHERS[d](text) == exact, (d, text)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), d=st.sampled_from(DIVISORS))
def test_every_multiple_accepted(data: st.DataObject, d: str) -> None:
    text = data.draw(_multiples_of(d))
    assert _MATCHERS[d](text), (d, text)


@pytest.mark.parametrize("d, valid, invalid", [
    ("3", ["6", "6.0", "6.000", "-9", "0", "0.0"], ["4", "6.5", "6.01", "1e1"]),
    ("1.5", ["4.5", "4.50", "3", "3.0", "-1.5"], ["4.51", "1", "0.15"]),
    ("0.3", ["0.9", "0.90", "1.2", "3", "-0.6"], ["0.1", "0.31", "0.03"]),
    ("0.07", ["0.07", "0.14", "0.140", "7", "0.21"], ["0.1", "0.0701", "0.007"]),
])
def test_trailing_zeros_and_exponents(d: str, valid: list[str], invalid: list[str]) -> None:
    match = _matcher({"type": "number", "multipleOf": float(d)})
    assert [t for t in valid if not match(t)] == [] and [t for t in invalid if match(t)] == []


@pytest.mark.parametrize("d", ["0.01", "0.5", "2.5", "3", "0.3"])
def test_exponent_spellings_not_produced(d: str) -> None:
    assert not _MATCHERS[d]("3e2") and _MATCHERS[d]("300")


@settings(max_examples=300, deadline=None)
@given(k=st.integers(1, 120), n=st.integers(-10**7, 10**7))
def test_integer_type_any_divisor(k: int, n: int) -> None:
    match = _integer_matcher(k)
    assert match(str(n)) == (n % k == 0), (k, n)
    assert not match(f"{n}.5")


@functools.cache
def _integer_matcher(k: int):  # noqa: ANN202
    return _matcher({"type": "integer", "multipleOf": k})


@settings(max_examples=200, deadline=None)
@given(d=st.sampled_from(RESIDUE_DIVISORS), lo=st.integers(-200, 200), width=st.integers(0, 400),
       text=_plain_decimals())
def test_residue_divisor_with_bounds(d: str, lo: int, width: int, text: str) -> None:
    schema = {"type": "number", "multipleOf": float(d), "minimum": lo / 4,
              "exclusiveMaximum": (lo + width) / 4}
    x, step, low, high = Fraction(text), Fraction(d), Fraction(lo, 4), Fraction(lo + width, 4)
    try:
        match = _matcher(schema)
    except GrammarError:  # "accepts no JSON value": then no multiple lies in [low, high)
        assert -(-low // step) * step >= high, schema
        return
    exact = (x / step).denominator == 1 and low <= x < high
    assert match(text) == exact, (schema, text)


@settings(max_examples=200, deadline=None)
@given(d=st.sampled_from(RESIDUE_DIVISORS), text=_plain_decimals())
def test_negated_divisor(d: str, text: str) -> None:
    match = _NEGATED[d]
    assert match(text) == ((Fraction(text) / Fraction(d)).denominator != 1), (d, text)
    assert not match('"x"')  # not multipleOf: only numbers can fail multipleOf


_NEGATED = {d: _matcher({"not": {"multipleOf": float(d)}}) for d in RESIDUE_DIVISORS}


def test_agrees_with_jsonschema_where_floats_are_exact(check_schema) -> None:  # noqa: ANN001
    check_schema({"type": "number", "multipleOf": 0.5}, ["1.5", "-2", "0", "3.50", "4.0"],
                 ["0.3", "1.25", "7.1"])
    check_schema({"type": "integer", "multipleOf": 7}, ["14", "-21", "0", "700"],
                 ["15", "1", "-22"])
    check_schema({"type": "number", "multipleOf": 0.3}, ["0.6", "1.2", "3", "-1.5", "6.0"],
                 ["0.1", "0.31", "1"])
    check_schema({"type": "number", "multipleOf": 0.3, "minimum": 0.5, "maximum": 2.5},
                 ["0.6", "1.2", "1.50", "2.4"], ["0.3", "2.7", "1", "1.3"])
    check_schema({"not": {"multipleOf": 3}}, ["4", "4.5", "-1"], ["3", "0", "-6", '"a"', "[]"])
    check_schema({"oneOf": [{"type": "integer"}, {"multipleOf": 3}]}, ["1", "-2", '"a"', "null"],
                 ["3", "6", "0", "1.5"])
    check_schema({"type": "integer", "multipleOf": 2.5}, ["5", "10", "-15", "0"],
                 ["2", "7", "2.5"])
    check_schema({"type": "number", "multipleOf": 0.25, "minimum": 1, "maximum": 2},
                 ["1", "1.25", "2.00"], ["0.75", "1.3", "2.25"])


@pytest.mark.parametrize("d", [13, 0.11, 1.7])
def test_large_residue_automaton_not_printed(d: float) -> None:
    """The automaton is exact; only its regex *text* is too large, and says so."""
    node, _ = json_schema_to_node({"type": "number", "multipleOf": d}, JsonSchemaOptions())
    with pytest.raises(ra.RenderTooLargeError, match="multipleOf"):
        ra.render(node)
    with pytest.raises(GrammarError, match="multipleOf"):
        json_schema_to_regex({"type": "number", "multipleOf": d})


def test_non_positive_divisor_refused_by_name() -> None:
    with pytest.raises(GrammarError, match="multipleOf"):
        json_schema_to_node({"type": "number", "multipleOf": 0}, JsonSchemaOptions())


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


@pytest.mark.parametrize("schema, text, ok", [
    ({"type": "integer", "multipleOf": 7}, "343", True),
    ({"type": "integer", "multipleOf": 7}, "344", False),
    ({"type": "number", "multipleOf": 0.3, "minimum": 1}, "1.50", True),
    ({"type": "number", "multipleOf": 0.3, "minimum": 1}, "1.51", False),
    ({"type": "object", "properties": {"n": {"type": "number", "multipleOf": 11}},
      "required": ["n"]}, '{"n":1331}', True),
])
def test_residue_divisor_decodes_with_masks(compiler, tokenizer, schema: dict, text: str,  # noqa: ANN001
                                            ok: bool) -> None:
    """Through the compiled grammar: every token of an accepted text is in its state's mask,
    and a rejected text is stopped by a mask."""
    import torch

    from radixlm.fsm import GrammarSpec

    matcher = compiler.compile(GrammarSpec.json_schema(schema)).new_matcher()
    mask = torch.zeros(compiler.vocab.num_words, dtype=torch.int32)  # int32 words
    accepted = True
    for char in text:  # one character at a time: the tiny vocabulary has every byte
        token = tokenizer.convert_tokens_to_ids(char)
        matcher.fill_bitmask(mask)
        if not (int(mask[token // 32]) >> (token % 32)) & 1:  # bit t of the int32 row
            accepted = False
            break
        assert matcher.accept_token(token)
    assert (accepted and matcher.can_end()) == ok


@settings(max_examples=200, deadline=None)
@given(k=st.sampled_from([1, 3, 4, 33, 420]), not_k=st.lists(st.sampled_from(
    [2, 7, 8, 11, 630, 0.5]), min_size=1, max_size=3), n=st.integers(-10**6, 10**6),
       lo=st.sampled_from([None, -3, 0, 1, 2]))
def test_multiple_of_and_not_multiple_of(k: int, not_k: list, n: int, lo: int | None) -> None:
    # one residue automaton for the divisor and the excluded divisors together
    ints = [int(Fraction(m).numerator) for m in not_k]  # 0.5 divides every integer: 1

    def ok(v: int) -> bool:
        return v % k == 0 and all(v % d for d in ints) and (lo is None or v >= lo)

    schema = {"type": "integer", "multipleOf": k,
              "allOf": [{"not": {"multipleOf": m}} for m in not_k]}
    if lo is not None:
        schema["minimum"] = lo
    period = math.lcm(k, *ints)
    if not any(ok(v) for v in range(period, 2 * period, k)):  # a whole period: none
        with pytest.raises(GrammarError, match="accepts no JSON value"):
            _matcher(schema)
        return
    assert _matcher(schema)(str(n)) == ok(n), (k, not_k, n)
