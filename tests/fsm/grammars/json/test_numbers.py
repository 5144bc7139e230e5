"""Numbers: bounds (inclusive, exclusive, draft-4 booleans), divisors, digit caps."""

from __future__ import annotations

import pytest

CASES = {
    "integer range": ({"type": "integer", "minimum": -3, "maximum": 120},
                      ["-3", "0", "120", "99"], ["-4", "121", "1000"]),
    "exclusive integer": ({"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 10},
                          ["1", "9"], ["0", "10"]),
    "fractional bounds on integers": ({"type": "integer", "minimum": 0.5, "maximum": 2.5},
                                      ["1", "2"], ["0", "3"]),
    "number range": ({"type": "number", "minimum": -1.5, "maximum": 2},
                     ["-1.5", "0", "1.999", "2", "2.000"], ["-1.51", "2.001", "3"]),
    "exclusive number": ({"type": "number", "exclusiveMinimum": 0}, ["0.001", "5"],
                         ["0", "0.0", "-1"]),
    "draft-04 boolean exclusive": ({"$schema": "http://json-schema.org/draft-04/schema#",
                                    "type": "number", "minimum": 1, "exclusiveMinimum": True},
                                   ["1.5", "2"], ["1", "0.5"]),
    "unbounded number with exponent": ({"type": "number"}, ["1e5", "-0.5E-3", "3"],
                                       ["1e", "01", ".5", "+1"]),
    "multipleOf last digits": ({"type": "integer", "multipleOf": 4}, ["0", "8", "-12", "100"],
                               ["2", "6", "102"]),
    "multipleOf of numbers is integral": ({"type": "number", "multipleOf": 5},
                                          ["10", "-25"], ["7", "2.5"]),
    "multipleOf enumerated in a range": ({"type": "integer", "multipleOf": 7, "minimum": 0,
                                          "maximum": 30}, ["0", "7", "28"], ["3", "35"]),
    "multipleOf with bounds": ({"type": "integer", "multipleOf": 10, "minimum": 15},
                               ["20", "1000"], ["10", "25"]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_number_keywords(check_schema, name: str) -> None:  # noqa: ANN001
    schema, valid, invalid = CASES[name]
    check_schema(schema, valid, invalid)


def test_digit_cap(check_schema) -> None:  # noqa: ANN001
    check_schema({"type": "number"}, ["123", "1.25", "1e12"], ["1234", "1.1255", "1e1234"],
                 judge=False, max_number_digits=3)
