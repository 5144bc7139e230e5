"""Arrays: items, tuple items, counts, contains."""

from __future__ import annotations

import pytest

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
