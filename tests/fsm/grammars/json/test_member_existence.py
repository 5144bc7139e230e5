"""Objects that must hold a member with a given name (``not: {propertyNames: {not: ...}}``)
are decided by a short liveness search: the best-first search heads for the shortest
completion, where a depth-first one wandered into free-form values past any budget."""

from __future__ import annotations

import pytest

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import LazyDFA
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node

HAS_ZERO = {"type": "object", "not": {"propertyNames": {"not": {"const": "0"}}}}
CASES = {
    "named key": (HAS_ZERO, ['{"0":1}', '{"a":[1],"0":null}'], ["{}", '{"a":1}', '{"00":1}']),
    "named key with patternProperties": (
        {**HAS_ZERO, "patternProperties": {"\\d": {"type": "boolean"}}},
        ['{"0":true}', '{"x":1,"0":false}'], ['{"0":1}', '{"x":1}']),
    "two named keys and a name pattern": (
        {"type": "object", "allOf": [
            {"not": {"propertyNames": {"not": {"const": "a4"}}}},
            {"not": {"propertyNames": {"not": {"const": "a4d3"}}}},
            {"patternProperties": {"3": {"type": "boolean"}}},
            {"propertyNames": {"pattern": "^(\\w\\d)+$"}}]},
        ['{"a4":1,"a4d3":true}'], ['{"a4":1}', '{"a4":1,"a4d3":1}', '{"a4":1,"a4d3":true,"b":1}']),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_member_existence_decided_within_a_small_budget(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)
    node, _ = json_schema_to_node(schema, JsonSchemaOptions())
    builder = TermBuilder(liveness_budget=500)  # the corpus schemas took > 50,000 depth-first
    dfa = LazyDFA(builder, builder.lower(node))
    assert builder.is_live(builder.lower(node)) and dfa.initial is not None
