"""JSON Schema → regex: dispatch, combinators, references, drafts, refusals, API."""

from __future__ import annotations

import json
import re

import pytest

from radixlm.fsm import GrammarError, WhitespacePolicy, json_schema_to_regex
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node

OBJ_AB = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}

CASES = {
    "type list": ({"type": ["integer", "null"]}, ["3", "null", "-1"], ['"x"', "1.5", "true"]),
    "boolean schema true": (True, ["1", '"x"', "[]", '{"a":[1]}', "null"], ["", "nul"]),
    "type-less format-only": ({"format": "date"}, ['"2024-01-31"', "5", "[]"],
                              ['"2024-01-32"']),
    "type-less description-only": ({"description": "anything"}, ["5", '"s"'], ["x"]),
    "enum mixed": ({"enum": ["a", 1, None, [1, 2], {"k": True}]},
                   ['"a"', "1", "null", "[1,2]", '{"k":true}'], ['"b"', "2", "[2,1]"]),
    "const object": ({"const": {"x": 1}}, ['{"x":1}', '{ "x": 1 }'], ['{"x":2}', "{}"]),
    "enum filtered by type": ({"type": "string", "enum": ["a", 1]}, ['"a"'], ["1"]),
    "allOf merges objects": ({"allOf": [{"properties": {"a": {"type": "integer"}},
                                         "required": ["a"]},
                                        {"properties": {"b": {"type": "integer"}},
                                         "required": ["b"]}]},
                             ['{"a":1,"b":2}'], ['{"a":1}{"b":2}', '{"a":1}', '{"b":2}']),
    "allOf intersects types": ({"allOf": [{"type": ["string", "integer"]},
                                          {"type": ["integer", "null"]}]}, ["5"],
                               ['"s"', "null"]),
    "allOf tightens bounds": ({"allOf": [{"minimum": 2}, {"maximum": 4}], "type": "integer"},
                              ["2", "4"], ["1", "5"]),
    "anyOf distributes": ({"type": "object", "properties": {"k": {"type": "string"}},
                           "anyOf": [{"required": ["k"]}, {"required": ["z"]}]},
                          ['{"k":"v"}', '{"z":0}'], ["{}", '{"y":1}']),
    "oneOf disjoint types": ({"oneOf": [{"type": "string"}, {"type": "integer"}]},
                             ['"x"', "3"], ["true", "1.5"]),
    "oneOf discriminator": ({"oneOf": [
        {"properties": {"t": {"const": "a"}, "x": {"type": "integer"}}, "required": ["t"]},
        {"properties": {"t": {"const": "b"}, "y": {"type": "string"}}, "required": ["t"]}],
        "type": "object"}, ['{"t":"a","x":1}', '{"t":"b","y":"s"}'],
        ['{"t":"c"}', '{"t":"a","x":"s"}']),
    "local ref": ({"$defs": {"n": {"type": "integer", "minimum": 0}},
                   "properties": {"v": {"$ref": "#/$defs/n"}}, "type": "object"},
                  ['{"v":3}'], ['{"v":-1}']),
    "ref with siblings (2020-12)": ({"$defs": {"s": {"type": "string"}},
                                     "$ref": "#/$defs/s", "maxLength": 2},
                                    ['"ab"'], ['"abc"', "1"]),
    "ref siblings ignored (draft-07)": ({"$schema": "http://json-schema.org/draft-07/schema#",
                                         "definitions": {"s": {"type": "string"}},
                                         "$ref": "#/definitions/s", "maxLength": 2},
                                        ['"abc"'], ["1"]),
    "anchor ref": ({"$defs": {"x": {"$anchor": "pos", "type": "integer", "minimum": 1}},
                    "$ref": "#pos"}, ["1"], ["0"]),
    "draft-04 has no const": ({"$schema": "http://json-schema.org/draft-04/schema#",
                               "type": "integer", "const": 3}, ["3", "4"], ["1.5"]),
    "draft-04: 1.0 is not an integer": ({"$schema": "http://json-schema.org/draft-04/schema#",
                                         "type": "integer"}, ["1"], ["1.0"]),
    "draft 2020: 1.0 is an integer": ({"type": "integer"}, ["1", "1.0", "-2.00"], ["1.5"]),
    "unknown keyword ignored": ({"type": "integer", "x-custom": {"minimum": 5}}, ["1"], []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_keyword_cases(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid, max_recursion_depth=2)


OUTLINES_DEFECTS = {
    "pattern alternation is grouped": (
        {"properties": {"a": {"type": "string", "pattern": "^(cat|dog)$"}}, "required": ["a"]},
        ['{"a":"cat"}', '{"a":"dog"}'], ['{"a":"cat}', '{"a":dog"}', '{"a":"cow"}']),
    "bare alternation is grouped": (
        {"properties": {"a": {"type": "string", "pattern": "cat|dog"}}, "required": ["a"]},
        ['{"a":"cat"}', '{"a":"hotdog"}'], ['{"a":"cat}', '{"a":dog"}']),
    "allOf is not concatenation": (
        {"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}},
                   {"properties": {"b": {"type": "integer"}}}]},
        ['{"a":1,"b":2}', "{}"], ['{"a":1}{"b":2}']),
    "additionalProperties false alone": ({"type": "object", "additionalProperties": False},
                                         ["{}", "{ }"], ['{"a":1}']),
    "additionalProperties next to properties": (
        {"type": "object", "properties": {"a": {"type": "integer"}},
         "additionalProperties": {"type": "string"}},
        ['{"a":1,"b":"x"}', '{"b":"x"}'], ['{"a":"x"}', '{"b":1}', '{"a":1,"a":"x"}']),
    "pattern anchored at one end": ({"type": "string", "pattern": "^ab"},
                                    ['"ab"', '"abc"'], ['"xab"']),
    "pattern anchored at the end": ({"type": "string", "pattern": "\\.json$"},
                                    ['"a.json"'], ['"a.jsonx"']),
    "minimum/maximum enforced": ({"type": "integer", "minimum": 5, "maximum": 7},
                                 ["5", "7"], ["4", "8"]),
    "multipleOf enforced": ({"type": "integer", "multipleOf": 5}, ["10", "-5", "0"],
                            ["7", "12"]),
    "false sub-schema": ({"type": "object", "properties": {"a": False}},
                         ["{}", '{"b":1}'], ['{"a":1}']),
}


@pytest.mark.parametrize("name", sorted(OUTLINES_DEFECTS))
def test_outlines_core_defects_are_fixed(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = OUTLINES_DEFECTS[name]
    check_schema(schema, valid, invalid)


@pytest.mark.parametrize("schema, keyword", [
    ({"type": "array", "uniqueItems": True}, "uniqueItems"),
    ({"oneOf": [{"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True},
                {"type": "array", "minItems": 1}]}, "oneOf"),
    ({"type": "string", "format": "uri-template"}, "format"),
    ({"type": "number", "multipleOf": -0.3}, "multipleOf"),
    ({"$dynamicRef": "#x"}, "$dynamicRef"),
    ({"type": "object", "unevaluatedProperties": False}, "unevaluatedProperties"),
    ({"type": "array", "contains": {"type": "integer"}, "maxContains": 2}, "maxContains"),
    ({"type": "object", "minProperties": 2}, "minProperties"),
])
def test_unenforceable_keywords_are_named(schema, keyword: str) -> None:  # noqa: ANN001
    with pytest.raises(GrammarError, match=re.escape(keyword)):
        json_schema_to_node(schema)


@pytest.mark.parametrize("depth", [1, 2, 3])
def test_recursion_is_cut_at_the_limit(check_schema, depth: int) -> None:  # noqa: ANN001
    tree = {"$defs": {"t": {"type": "object", "properties": {"c": {"$ref": "#/$defs/t"}},
                            "additionalProperties": False}}, "$ref": "#/$defs/t"}
    nested = ["{}"]
    for _ in range(depth):
        nested.append('{"c":' + nested[-1] + "}")
    # the root's own $ref is the first expansion
    check_schema(tree, nested[:depth], nested[depth:], judge=False, max_recursion_depth=depth)


def test_lenient_ignores_with_a_warning() -> None:
    with pytest.warns(UserWarning, match="uniqueItems"):
        node, notes = json_schema_to_node({"type": "array", "uniqueItems": True},
                                          JsonSchemaOptions(lenient=True, any_value_depth=1))
    assert any("uniqueItems" in n for n in notes)


@pytest.mark.parametrize("schema, message", [
    ("{not json", "not valid JSON"),
    ({"type": "integr"}, "JSON type name"),
    ({"$ref": "other.json#/x"}, "only references inside the schema"),
    ({"$ref": "#/$defs/missing"}, "does not resolve"),
    ({"minLength": -1, "type": "string"}, "non-negative integer"),
    (False, "accepts no JSON value"),
    ({"type": "integer", "minimum": 5, "maximum": 4}, "accepts no JSON value"),
    ({"$schema": "http://json-schema.org/draft-03/schema#"}, "draft-03"),
])
def test_bad_schemas_are_refused(schema, message: str) -> None:  # noqa: ANN001
    with pytest.raises(GrammarError, match=message):
        json_schema_to_node(schema)


@pytest.mark.parametrize("mode, text, ok", [
    ("compact", '{"a":1}', True), ("compact", '{"a": 1}', False),
    ("single", '{ "a" : 1 }', True), ("single", '{"a":  1}', False),
    ("flexible", '{\n  "a": 1\n}', True), ("flexible", '{"a":' + " " * 20 + "1}", False),
])
def test_whitespace_policies(check_schema, mode: str, text: str, ok: bool) -> None:  # noqa: ANN001
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"],
              "additionalProperties": False}
    valid, invalid = ([text], []) if ok else ([], [text])
    check_schema(schema, valid, invalid, judge=False, whitespace=WhitespacePolicy(mode))


def test_property_order_is_the_schemas() -> None:
    regex = json_schema_to_regex(OBJ_AB, whitespace=WhitespacePolicy("compact"),
                                 any_value_depth=1)
    assert re.fullmatch(regex, '{"a":1,"b":"x"}')
    assert not re.fullmatch(regex, '{"b":"x","a":1}')  # extras never repeat declared names


def test_pydantic_models_are_schemas() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Person(pydantic.BaseModel):
        name: str
        age: int

    regex = json_schema_to_regex(Person, any_value_depth=1)
    assert re.fullmatch(regex, json.dumps({"name": "Ann", "age": 3}))
    assert not re.fullmatch(regex, json.dumps({"name": "Ann"}))


def test_optional_properties_grow_linearly() -> None:
    many = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(60)},
            "additionalProperties": False}
    sizes = [len(json_schema_to_regex({**many, "properties": dict(list(
        many["properties"].items())[:n])})) for n in (15, 30, 60)]
    assert sizes[2] < 4.5 * sizes[1] < 20 * sizes[0]  # quadratic text at worst, no blow-up
