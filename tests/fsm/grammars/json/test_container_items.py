"""``contains`` (several at once, with item counts), ``not items`` and ``not contains`` over
container items, and the ``oneOf`` exclusivity they make possible: the grammar accepts a value
exactly when ``jsonschema`` calls it valid.

Random small JSON values (hypothesis) are judged by both; a value is accepted when some
spelling of it is (:func:`find_accepted_text`).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

SCHEMAS = {
    "not items of objects": {"type": "array",
                             "not": {"items": {"type": "object", "required": ["a"]}}},
    "oneOf: all items objects with a, or non-empty": {
        "oneOf": [{"type": "array", "items": {"type": "object", "required": ["a"]}},
                  {"type": "array", "minItems": 1}]},
    "not contains an object": {"not": {"contains": {"type": "object", "required": ["a"]}}},
    "oneOf over nested arrays": {
        "type": "array",
        "oneOf": [{"items": {"type": "array", "contains": {"const": 1}}},
                  {"items": {"type": "array", "items": {"type": "integer", "maximum": 2}}}]},
    "oneOf of items and contains": {
        "type": "array",
        "oneOf": [{"anyOf": [{"items": {"type": "array", "maxItems": 1}},
                             {"contains": {"type": "object"}}]},
                  {"anyOf": [{"items": {"type": "object", "required": ["b"]}},
                             {"contains": {"type": "array", "minItems": 1}}]}]},
    "two negated item schemas, at most two items": {
        "type": "array", "maxItems": 2,
        "allOf": [{"not": {"items": {"patternProperties": {"a": False},
                                     "additionalProperties": False}}},
                  {"not": {"items": {"type": "object", "required": ["b"]}}}]},
    "two contains, at least three items": {
        "type": "array", "minItems": 3,
        "allOf": [{"contains": {"type": "object", "required": ["a"]}},
                  {"contains": {"type": "object", "required": ["b"]}}]},
    "three contains, at most two items": {
        "type": "array", "maxItems": 2, "items": {"type": ["object", "integer"]},
        "allOf": [{"contains": {"required": ["a"]}}, {"contains": {"required": ["b"]}},
                  {"contains": {"type": "integer", "maximum": 1}}]},
    "contains of arrays, one or two items": {
        "type": "array", "minItems": 1, "maxItems": 2,
        "contains": {"type": "array", "contains": {"const": 2}}},
}

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(0, 3), st.sampled_from(["a", "b"]))
VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(st.sampled_from(["a", "b", "ab"]), inner, max_size=2)),
    max_leaves=8)


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=150, deadline=None)
@given(value=st.lists(VALUES, max_size=3))
def test_grammar_agrees_with_jsonschema(judged_automaton, name: str,  # noqa: ANN001
                                        value: list) -> None:
    assert judged_automaton(SCHEMAS[name], value)

