"""Arrays: items, tuple items, counts, contains, uniqueItems over finite domains."""

from __future__ import annotations

import pytest

from radixlm.fsm import GrammarError
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node

CASES = {
    "items and counts": ({"type": "array", "items": {"type": "integer"}, "minItems": 1,
                          "maxItems": 3}, ["[1]", "[1, 2, 3]"], ["[]", "[1,2,3,4]", '["x"]']),
    "prefixItems then items false": ({"type": "array", "prefixItems": [{"type": "integer"},
                                                                        {"type": "string"}],
                                      "items": False}, ["[]", "[1]", '[1,"a"]'],
                                     ['[1,"a",2]', '["a"]']),
    "prefixItems then rest": ({"type": "array", "prefixItems": [{"const": 0}],
                               "items": {"type": "boolean"}, "minItems": 2},
                              ["[0,true]", "[0,false,true]"], ["[0]", "[1,true]", "[0,1]"]),
    "draft-07 tuple items": ({"$schema": "http://json-schema.org/draft-07/schema#",
                              "type": "array", "items": [{"type": "integer"}],
                              "additionalItems": {"type": "string"}},
                             ['[1,"a","b"]', "[1]"], ['[1,2]', '["a"]']),
    "contains": ({"type": "array", "contains": {"type": "string"}},
                 ['["a"]', '[1,"a",2]'], ["[]", "[1,2]"]),
    "contains with counts": ({"type": "array", "items": {"type": ["integer", "string"]},
                              "contains": {"type": "string"}, "maxItems": 2},
                             ['["a"]', '[1,"a"]'], ["[1,2]", '[1,2,"a"]']),
    "minContains 0": ({"type": "array", "contains": {"type": "string"}, "minContains": 0},
                      ["[]", "[1]"], []),
    "uniqueItems with at most one item": ({"type": "array", "uniqueItems": True,
                                           "maxItems": 1}, ["[]", "[1]"], ["[1,2]"]),
    "empty prefix item makes later positions impossible": (
        {"type": "array", "prefixItems": [{"type": "integer"}, False]}, ["[]", "[1]"],
        ["[1,2]"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_array_keywords(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


def test_capped_items(check_schema) -> None:  # noqa: ANN001
    check_schema({"type": "array"}, ["[1,2]"], ["[1,2,3]"], judge=False, max_array_items=2)


UNIQUE = {
    "enum items": ({"type": "array", "uniqueItems": True, "items": {"enum": ["a", "b", "c"]}},
                   ["[]", '["a"]', '["c","a"]', '["b","a","c"]'],
                   ['["a","a"]', '["a","b","a"]', '["d"]', '["a","b","c","a"]']),
    "booleans with bounds": ({"type": "array", "uniqueItems": True, "minItems": 1,
                              "items": {"type": "boolean"}},
                             ["[true]", "[false,true]"], ["[]", "[true,true]",
                                                          "[true,false,true]"]),
    "1 and 1.0 are one value": ({"type": "array", "uniqueItems": True,
                                 "items": {"enum": [1, 2, True]}},
                                ["[1,true]", "[1.0,2]", "[true,2,1]"], ["[1,1.0]", "[2,2.0]",
                                                                        "[true,true]"]),
    "with contains": ({"type": "array", "uniqueItems": True, "items": {"enum": [1, 2, 3]},
                       "contains": {"const": 3}}, ["[3]", "[1,3]", "[3,2,1]"],
                      ["[]", "[1,2]", "[3,3]"]),
    "objects as values": ({"type": "array", "uniqueItems": True,
                           "items": {"enum": [{"a": 1}, [1, 2]]}},
                          ['[{"a":1},[1,2]]', "[[1,2]]"], ['[{"a":1},{"a":1}]']),
}


@pytest.mark.parametrize("name", sorted(UNIQUE))
def test_unique_items_over_finite_domains(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = UNIQUE[name]
    check_schema(schema, valid, invalid)


def test_unique_items_over_large_domains_refused() -> None:
    schema = {"type": "array", "uniqueItems": True, "items": {"enum": list(range(20))}}
    with pytest.raises(GrammarError, match="uniqueItems"):
        json_schema_to_node(schema, JsonSchemaOptions())
