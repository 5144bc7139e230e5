"""patternProperties across merged schemas (allOf/$ref: each part's patterns and its own
additionalProperties), and finite patterns (``^(a|b)$``) read as declared properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.grammars.json.literal_patterns import finite_strings, pattern_keys
from radixlm.fsm.regex import tree as ra

CASES = {
    "two merged parts with patterns": (
        {"type": "object", "allOf": [{"patternProperties": {"a": {"type": "number",
                                                                  "minimum": 10}}},
                                     {"patternProperties": {"b": {"type": "number",
                                                                  "minimum": 3}}}]},
        ['{"a":10}', '{"b":3}', '{"ab":11}', '{"c":"x"}', '{"a":12,"b":4}'],
        ['{"a":9}', '{"b":2}', '{"ab":5}', '{"ba":"x"}']),
    "each part's additionalProperties is its own": (
        {"allOf": [{"patternProperties": {"^x": True}, "additionalProperties": False},
                   {"patternProperties": {"y$": {"type": "integer"}}}]},
        ['{"x":"s"}', '{"xy":1}', "{}"], ['{"y":1}', '{"xy":"s"}', '{"z":1}']),
    "merged through $ref": (
        {"$ref": "#/$defs/p", "patternProperties": {"^n": {"type": "integer"}},
         "$defs": {"p": {"patternProperties": {"^n": {"minimum": 0}, "^s": {"type": "string"}},
                         "additionalProperties": False}}},
        ['{"n":1}', '{"s":"a"}', '{"n1":0,"s2":"b"}'], ['{"n":-1}', '{"n":1.5}', '{"q":1}']),
    "finite patterns are properties": (
        {"type": "object", "additionalProperties": False,
         "patternProperties": {"^(cdn|Cdn)$": {"type": "integer"}, "^pwa$": {"type": "string"},
                               "^c": {"minimum": 5}, "^(a|b)(1|2)$": {"type": "boolean"},
                               "^x$": True, "^y$": True}},
        ['{"cdn":5}', '{"Cdn":1,"pwa":"x"}', '{"a1":true,"b2":false}', '{"cx":7}', "{}",
         '{"x":1,"y":2}'],
        ['{"cdn":4}', '{"cdnx":1}', '{"pwa":1}', '{"a3":true}', '{"z":1}', '{"cx":1}']),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_pattern_properties(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


@pytest.mark.parametrize("pattern, keys", [
    ("^(cdn|Cdn)$", ["cdn", "Cdn"]), ("^a[bc]$", ["ab", "ac"]), ("^x$|^y$", ["x", "y"]),
    ("^(?:v|V)1$", ["v1", "V1"]), ("^ab", None), ("a$", None), ("^a+$", None),
    ("^[a-z]{2}$", None),
])
def test_pattern_keys(pattern: str, keys: list[str] | None) -> None:
    assert pattern_keys(pattern) == keys


@given(st.lists(st.text(alphabet="ab", min_size=0, max_size=3), min_size=1, max_size=5))
def test_finite_strings_round_trip(words: list[str]) -> None:
    node = ra.alt(*(ra.lit(w) for w in words))
    assert sorted(finite_strings(node)) == sorted(set(words))


FIVE_PATTERNS = {"type": "object", "patternProperties": {
    "a": {"type": "integer"}, "b": {"minimum": 2}, "c": {"type": "number"},
    "d": {"maximum": 5}, "e": {"not": {"const": 3}}}}


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.text(alphabet="abcdex", max_size=3),
                       st.one_of(st.integers(0, 6), st.floats(0, 6, width=16), st.just("s")),
                       max_size=3))
def test_five_patterns_for_additional_keys(judged_automaton, value: dict) -> None:  # noqa: ANN001
    # more than four patterns: a key is read by which of the 32 subsets it matches (the
    # printed regex is too large for Python's re to compile quickly: the automaton alone)
    assert judged_automaton(FIVE_PATTERNS, value)
