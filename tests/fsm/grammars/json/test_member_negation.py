"""not over propertyNames / patternProperties / additionalProperties: "some member violates
it", an existence fact over the object's members (exact against ``jsonschema``)."""

from __future__ import annotations

import pytest

ANY_A = {"type": "object", "additionalProperties": {"type": "integer"}}

CASES = {
    "not propertyNames": (
        {"type": "object", "not": {"propertyNames": {"pattern": "^a"}}},
        ['{"b":1}', '{"a":1,"bc":2}', '{"ab":[1,{"x":2}],"q":null}'],
        ["{}", '{"a":1}', '{"ab":1,"ac":[1,2]}']),
    "not propertyNames, non-objects pass": (
        {"not": {"propertyNames": {"maxLength": 1}}},
        ['{"bb":1}', '{"a":1,"bb":2}'],
        ["{}", '{"a":1}', "1", '"s"', "[1]"]),
    "not propertyNames with enum keys": (
        {"type": "object", "properties": {"a": {"type": "integer"}},
         "not": {"propertyNames": {"enum": ["a", "b"]}}},
        ['{"a":1,"c":2}', '{"z":true}'], ['{"a":1}', '{"a":1,"b":2}', '{"a":"x","c":1}']),
    "not patternProperties": (
        {"not": {"patternProperties": {"^x": {"type": "integer"}}}},
        ['{"x":"s"}', '{"a":1,"xy":1.5}', '{"x":12.5}'],
        ["{}", '{"x":1}', '{"x":12,"xa":3}', "1", '"s"']),
    "not two patternProperties": (
        {"type": "object", "not": {"patternProperties": {"^x": {"type": "integer"},
                                                         "y$": {"type": "string"}}}},
        ['{"x":"s"}', '{"ay":1}', '{"xy":1}'], ["{}", '{"x":1,"y":"a"}', '{"b":true}']),
    "not additionalProperties beside properties": (
        {"not": {"properties": {"a": {"type": "string"}},
                 "additionalProperties": {"type": "integer"}}},
        ['{"a":1}', '{"b":"x"}', '{"a":"s","b":true}', '{"b":2,"c":[3]}'],
        ["{}", '{"a":"s"}', '{"a":"s","b":3}', '{"b":30}', "null"]),
    "not additionalProperties beside patternProperties": (
        {"type": "object", "not": {"patternProperties": {"^p": True},
                                   "additionalProperties": False}},
        ['{"q":1}', '{"p":1,"a":2}'], ["{}", '{"p":1}', '{"pa":1,"pb":"x"}']),
    "required member with a pattern violation": (
        {**ANY_A, "required": ["k"], "not": {"patternProperties": {"k": {"minimum": 5}}}},
        ['{"k":1}', '{"k":9,"kk":2}'], ['{"k":5}', '{"k":7,"ak":9}', '{"j":1}']),
    "oneOf made exclusive through not propertyNames": (
        {"oneOf": [{"type": "object", "propertyNames": {"pattern": "^a"}},
                   {"type": "object", "minProperties": 1}]},
        ["{}", '{"b":1}', '{"a":1,"b":2}'], ['{"a":1}', '{"ab":1,"ac":2}', "1"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_member_negation(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


OTHER_NEGATIONS = {
    "not oneOf: none or two": (
        {"type": "integer", "not": {"oneOf": [{"minimum": 5}, {"maximum": 10}]}},
        ["5", "7", "10"], ["4", "11", "0"]),
    "not dependencies list": (
        {"$schema": "http://json-schema.org/draft-07/schema#",
         "not": {"dependencies": {"a": ["b", "c"]}}},
        ['{"a":1}', '{"a":1,"b":2}'], ["{}", '{"a":1,"b":2,"c":3}', '{"b":1}', "1"]),
    "not dependentSchemas": (
        {"not": {"dependentSchemas": {"a": {"properties": {"b": {"type": "string"}}}}}},
        ['{"b":2,"a":1}'], ['{"a":1}', '{"b":"x","a":1}', '{"b":2}', "[]"]),
    "draft-07 not $ref with siblings": (
        {"$schema": "http://json-schema.org/draft-07/schema#",
         "definitions": {"s": {"type": "string"}},
         "not": {"$ref": "#/definitions/s", "type": "string"}},
        ["1", "null"], ['"x"']),
    "keywords the draft lacks are annotations inside not": (
        {"type": "integer", "anyOf": [{"not": {"dependencies": {"a": ["b"]}}},
                                      {"minimum": 0}]}, ["0", "5"], ["-1"]),
}


@pytest.mark.parametrize("name", sorted(OTHER_NEGATIONS))
def test_other_negations(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = OTHER_NEGATIONS[name]
    check_schema(schema, valid, invalid)
