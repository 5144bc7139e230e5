"""Objects: required/optional properties, additional and pattern properties, names, counts."""

from __future__ import annotations

import pytest

CASES = {
    "required and optional": (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"},
                                          "c": {"type": "integer"}},
         "required": ["b"], "additionalProperties": False},
        ['{"b":1}', '{"a":1,"b":2}', '{"b":1,"c":2}', '{"a":1,"b":2,"c":3}'],
        ["{}", '{"a":1}', '{"a":1,"c":2}', '{"b":1,"d":2}']),
    "required but undeclared": ({"type": "object", "required": ["x"]},
                                ['{"x":1}', '{"x":{"y":[]}}'], ["{}", '{"y":1}']),
    "additional schema": ({"type": "object", "additionalProperties": {"type": "boolean"}},
                          ["{}", '{"p":true,"q":false}'], ['{"p":1}']),
    "additional false with properties": (
        {"type": "object", "properties": {"a": {"type": "string"}},
         "additionalProperties": False}, ['{"a":"x"}', "{}"], ['{"a":"x","b":1}', '{"b":1}']),
    "patternProperties with additional false": (
        {"type": "object", "patternProperties": {"^x-": {"type": "integer"}},
         "additionalProperties": False}, ['{"x-a":1}', "{}"], ['{"x-a":"s"}', '{"y":1}']),
    "patternProperties next to additional schema": (
        {"type": "object", "patternProperties": {"^n": {"type": "number"}},
         "additionalProperties": {"type": "string"}},
        ['{"n1":1,"s":"x"}', '{"s":"x"}'], ['{"n1":"x"}', '{"s":1}']),
    "overlapping patterns intersect": (
        {"type": "object", "patternProperties": {"a": {"type": "integer"},
                                                 "b": {"minimum": 10}},
         "additionalProperties": False}, ['{"a":1}', '{"b":20}', '{"ab":15}'],
        ['{"ab":5}', '{"ab":15.5}', '{"c":1}']),
    "patterns apply to declared names": (
        {"type": "object", "properties": {"ax": {"type": "integer"}},
         "patternProperties": {"^a": {"minimum": 5}}}, ['{"ax":5}'], ['{"ax":4}']),
    "propertyNames pattern": ({"type": "object", "propertyNames": {"pattern": "^[a-z]+$"}},
                              ['{"abc":1}', "{}"], ['{"aB":1}', '{"1":1}']),
    "propertyNames enum": ({"type": "object", "propertyNames": {"enum": ["x", "y"]}},
                           ['{"x":1,"y":2}'], ['{"z":1}']),
    "propertyNames maxLength": ({"type": "object", "propertyNames": {"maxLength": 2}},
                                ['{"ab":1}'], ['{"abc":1}']),
    "minProperties and maxProperties": (
        {"type": "object", "properties": {"a": {}, "b": {}, "c": {}}, "minProperties": 2,
         "maxProperties": 2, "additionalProperties": False},
        ['{"a":1,"b":2}', '{"a":1,"c":2}', '{"b":1,"c":2}'],
        ['{"a":1}', '{"a":1,"b":2,"c":3}', "{}"]),
    "minProperties counts extras": (
        {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
         "minProperties": 2}, ['{"a":1,"x":2}'], ['{"a":1}', '{"x":1}']),
    "dependentRequired": (
        {"type": "object", "properties": {"card": {}, "billing": {}},
         "dependentRequired": {"card": ["billing"]}},
        ['{"card":1,"billing":2}', '{"billing":2}', "{}"], ['{"card":1}']),
    "dependentSchemas": (
        {"type": "object", "properties": {"a": {"type": "integer"}, "b": {}},
         "dependentSchemas": {"a": {"required": ["b"]}}},
        ['{"a":1,"b":2}', '{"b":2}'], ['{"a":1}']),
    "draft-07 dependencies": (
        {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
         "properties": {"a": {}, "b": {}}, "dependencies": {"a": ["b"]}},
        ['{"a":1,"b":2}', "{}"], ['{"a":1}']),
    "escaped names": ({"type": "object", "properties": {'q"uote\\': {"type": "integer"}},
                       "required": ['q"uote\\'], "additionalProperties": False},
                      ['{"q\\"uote\\\\":1}'], ['{"q\\"uote":1}']),
    "propertyNames with oneOf": (
        {"type": "object", "propertyNames": {"oneOf": [{"enum": ["ab", "cd", "A1"]},
                                                       {"pattern": "^[a-z]+$"}]}},
        ['{"x":1}', '{"A1":2}', "{}", '{"abc":1,"A1":2}'], ['{"ab":1}', '{"X":1}', '{"cd":1}']),
    "propertyNames with anyOf": (
        {"type": "object", "properties": {"long": {"type": "integer"}},
         "propertyNames": {"anyOf": [{"maxLength": 1}, {"pattern": "^x"}]}},
        ['{"a":1}', '{"xyz":"s"}', "{}"], ['{"ab":1}', '{"long":1}']),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_object_keywords(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


def test_extra_keys_never_repeat_declared_names(check_schema) -> None:  # noqa: ANN001
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    check_schema(schema, ['{"a":1,"b":"x"}'], ['{"a":1,"a":"x"}', '{"b":1,"a":"x"}'],
                 judge=False)


def test_capped_extras(check_schema) -> None:  # noqa: ANN001
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    check_schema(schema, ['{"a":1,"b":2}'], ['{"a":1,"b":2,"c":3}'], judge=False,
                 max_object_properties=2)
