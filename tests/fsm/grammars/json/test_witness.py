"""Witness search: some key order and number spelling accepted, or none."""

from __future__ import annotations

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import LazyDFA
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node
from radixlm.fsm.grammars.json.witness import find_accepted_text


def _dfa(schema) -> LazyDFA:  # noqa: ANN001
    node, _ = json_schema_to_node(schema, JsonSchemaOptions(any_value_depth=2))
    builder = TermBuilder()
    return LazyDFA(builder, builder.lower(node))


def test_reorders_keys_to_the_schema_order() -> None:
    dfa = _dfa({"type": "object", "properties": {k: {"type": "integer"} for k in "abcdef"},
                "required": ["d"], "additionalProperties": {"type": "string"}})
    result = find_accepted_text(dfa, {"x": "s", "f": 6, "d": 4, "a": 1})
    assert result.text == '{"a":1,"d":4,"f":6,"x":"s"}'


def test_spaced_separators_and_float_spellings() -> None:
    dfa = _dfa({"type": "object", "properties": {"v": {"type": "number", "maximum": 1}}})
    assert find_accepted_text(dfa, {"v": 1e-7}, spaced=True).text == '{"v": 0.0000001}'


def test_invalid_values_have_no_witness() -> None:
    dfa = _dfa({"type": "object", "properties": {"a": {"type": "integer"}},
                "additionalProperties": False})
    result = find_accepted_text(dfa, {"a": 1, "b": 2})
    assert result.text is None and not result.truncated
