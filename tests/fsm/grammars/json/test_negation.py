"""not, if/then/else, and oneOf exclusivity."""

from __future__ import annotations

import pytest

from radixlm.fsm import GrammarError
from radixlm.fsm.grammars.json import JsonSchemaOptions, SchemaCompiler
from radixlm.fsm.grammars.json.negation import provably_disjoint

CASES = {
    "not type": ({"not": {"type": "string"}}, ["1", "null", "{}"], ['"x"']),
    "not integer keeps fractions": ({"type": "number", "not": {"type": "integer"}},
                                    ["1.5", "-0.25"], ["1", "2.0"]),
    "not enum": ({"type": "string", "not": {"enum": ["a", "b"]}}, ['"c"', '"ab"'],
                 ['"a"', '"b"']),
    "not const number": ({"type": "number", "not": {"const": 1}}, ["2", "1.5"],
                         ["1", "1.0", "1.00"]),
    "not const object": ({"type": "object", "not": {"const": {"a": 1}}},
                         ['{"a":2}', "{}"], ['{"a":1}']),
    "not required": ({"type": "object", "not": {"required": ["a", "b"]}},
                     ["{}", '{"a":1}', '{"b":1}'], ['{"a":1,"b":2}']),
    "not pattern": ({"not": {"pattern": "^x"}}, ['"ax"', '"y"'], ['"xa"', "1"]),
    "not range": ({"type": "integer", "not": {"minimum": 3, "maximum": 5}}, ["2", "6"],
                  ["3", "4", "5"]),
    "not multipleOf": ({"type": "integer", "not": {"multipleOf": 2}}, ["1", "3", "-5"],
                       ["2", "0", "10"]),
    "not not": ({"not": {"not": {"type": "null"}}}, ["null"], ["1"]),
    "not anyOf": ({"not": {"anyOf": [{"type": "string"}, {"type": "number"}]}},
                  ["null", "true"], ['"a"', "1"]),
    "not allOf": ({"type": "integer", "not": {"allOf": [{"minimum": 2}, {"maximum": 3}]}},
                  ["1", "4"], ["2", "3"]),
    "not false": ({"type": "integer", "not": False}, ["1"], []),
    "if then else": ({"type": "object", "if": {"properties": {"t": {"const": "a"}},
                                               "required": ["t"]},
                      "then": {"required": ["x"]}, "else": {"required": ["y"]}},
                     ['{"t":"a","x":1}', '{"t":"b","y":1}', '{"y":1}'],
                     ['{"t":"a","y":1}', '{"t":"b","x":1}']),
    "if without then": ({"type": "integer", "if": {"minimum": 3}}, ["1", "5"], []),
    "not if/then/else": ({"type": "integer", "not": {"if": {"minimum": 5},
                                                     "then": {"multipleOf": 2},
                                                     "else": {"maximum": 0}}},
                         ["7", "1", "3"], ["6", "0", "-2", "8"]),
    "not if/then": ({"type": "integer", "not": {"if": {"minimum": 5},
                                                "then": {"multipleOf": 2}}},
                    ["7", "9"], ["6", "1", "-3"]),
    "oneOf with enums": ({"oneOf": [{"enum": [1, 2]}, {"enum": [2, 3]}]}, ["1", "3"], ["2"]),
    "oneOf of required sets": ({"type": "object", "oneOf": [{"required": ["a"]},
                                                            {"required": ["b"]}]},
                               ['{"a":1}', '{"b":1}'], ['{"a":1,"b":2}', "{}"]),
    "oneOf of an enum and a type it overlaps": ({"oneOf": [{"enum": ["ab", 1]},
                                                           {"type": "string"}]},
                                                ['"x"', "1"], ['"ab"', "2", "null"]),
    "oneOf overlapping types": ({"oneOf": [{"type": "integer"}, {"type": "number"}]},
                                ["1.5", "-0.25"], ["1", "2.0"]),
    "oneOf overlapping patterns": ({"type": "string", "oneOf": [{"pattern": "^a"},
                                                                {"pattern": "b$"}]},
                                   ['"ax"', '"xb"'], ['"ab"', '"x"']),
    "not items": ({"type": "array", "not": {"items": {"type": "integer"}}},
                  ['["a"]', '[1,"a"]'], ["[]", "[1,2]"]),
    "not items, draft 4": ({"$schema": "http://json-schema.org/draft-04/schema#",
                            "type": "array", "not": {"items": {"type": "string"}}},
                           ["[1]", '["a",null]'], ["[]", '["a"]']),
    "not type and items (De Morgan)": ({"not": {"type": "array", "items": {"type": "integer"}}},
                                       ["1", '"x"', '[1,"a"]'], ["[]", "[1]"]),
    "not items of objects": ({"type": "array", "not": {"items": {"type": "object",
                                                                 "required": ["a"]}}},
                             ['[{}]', '[{"a":1},2]'], ["[]", '[{"a":1}]', "{}"]),
    "not contains": ({"not": {"contains": {"type": "object"}}},
                     ["[]", "[1,[{}]]"], ["[{}]", "[1,{}]", "1"]),
    "not minItems": ({"not": {"minItems": 2}}, ["[]", "[1]"], ["[1,2]", "1"]),
    "not maxLength with annotations": ({"not": {"maxLength": 1, "description": "short"}},
                                       ['"ab"'], ['"a"', "1"]),
    "not maxLength with type": ({"not": {"type": "string", "maxLength": 2}},
                                ['"abc"', "1"], ['"ab"', '""']),
    "not format": ({"type": "string", "not": {"format": "date"}},
                   ['"x"', '"2024-13-01"'], ['"2024-01-01"']),
    "not minProperties": ({"not": {"minProperties": 1}}, ["{}"], ['{"a":1}', "1"]),
    "not required and not": ({"type": "object",
                              "not": {"required": ["a"], "not": {"required": ["b"]}}},
                             ["{}", '{"b":1}', '{"b":1,"a":2}'], ['{"a":1}']),
    "oneOf by negated lengths": ({"oneOf": [{"type": "string", "minLength": 2},
                                            {"maxLength": 5}]},
                                 ['"abcdef"', '"a"', "1"], ['"ab"', '"abcde"']),
    "oneOf disjoint ranges": ({"type": "integer", "oneOf": [{"maximum": 0},
                                                            {"minimum": 1}]},
                              ["0", "1", "-5"], []),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_negation_keywords(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


@pytest.mark.parametrize("a, b, disjoint", [
    ({"type": "string"}, {"type": "integer"}, True),
    ({"type": "number"}, {"type": "integer"}, False),
    ({"type": "object", "required": ["k"], "properties": {"k": {"const": 1}}},
     {"type": "object", "properties": {"k": {"const": 2}}}, True),
    ({"type": "object", "required": ["k"]},
     {"type": "object", "properties": {"k": False}}, True),
    ({"type": "object", "required": ["k"]}, {"type": "object"}, False),
    ({"type": "integer", "maximum": 3}, {"type": "integer", "minimum": 3}, False),
    ({"type": "integer", "exclusiveMaximum": 3}, {"type": "integer", "minimum": 3}, True),
])
def test_disjointness_proofs(a, b, disjoint: bool) -> None:  # noqa: ANN001
    compiler = SchemaCompiler(True, JsonSchemaOptions())
    fa, fb = compiler.facts_of((a, ())), compiler.facts_of((b, ()))
    assert provably_disjoint(compiler, fa, fb) == disjoint


def test_overlapping_one_of_without_enforceable_negation_is_refused() -> None:
    # not uniqueItems ("some two items are equal") is not a regular language
    with pytest.raises(GrammarError, match="oneOf.*not"):
        SchemaCompiler({"oneOf": [{"type": "array", "items": {"enum": [1, 2]},
                                   "uniqueItems": True},
                                  {"type": "array", "minItems": 1}]},
                       JsonSchemaOptions()).compile()
