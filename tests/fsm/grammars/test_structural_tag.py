"""Structural tags: free text until a trigger, then a schema-constrained body, then free text.

Membership is checked on the automaton; walks start with free text and the trigger (a random
walk almost never spells a trigger by chance) and must parse back into valid calls.
"""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
import torch

from radixlm.fsm import GrammarError, GrammarSpec
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.grammar_compiler import spec_to_node
from radixlm.testing.grammar_walk import random_walk

WEATHER = {"type": "object", "properties": {"city": {"type": "string", "maxLength": 12},
                                            "days": {"type": "integer", "minimum": 1,
                                                     "maximum": 7}},
           "required": ["city"], "additionalProperties": False}
TAG = {"type": "structural_tag",
       "structures": [{"begin": '<tool_call>{"name": "weather", "arguments": ',
                       "schema": WEATHER, "end": "}</tool_call>"},
                      {"begin": '<tool_call>{"name": "ping", "arguments": ',
                       "schema": {"type": "object", "properties": {}, "additionalProperties":
                                  False}, "end": "}</tool_call>"}],
       "triggers": ["<tool_call>"]}
CALL = re.compile(r'<tool_call>\{"name": "(\w+)", "arguments": (.*?)\}</tool_call>', re.S)


def _accepts(tag: dict):  # noqa: ANN202
    node, _ = spec_to_node(GrammarSpec.structural_tag(tag))
    builder = TermBuilder()
    term = builder.lower(node)
    return lambda text: builder.matches(term, text.encode())


W = '<tool_call>{"name": "weather", "arguments": {"city": "Oslo"}}</tool_call>'


@pytest.mark.parametrize("text, valid", [
    ("", True), ("just text, no call", True), (f"Let me check. {W}", True),
    (f"{W} It is sunny. {W}", True), (W, True),
    ('<tool_call>{"name": "ping", "arguments": {}}</tool_call>', True),
    ("a <tool_call> b", False),  # a trigger must open a structure
    ('<tool_call>{"name": "other", "arguments": {}}</tool_call>', False),
    ('<tool_call>{"name": "weather", "arguments": {"city": 3}}</tool_call>', False),
    ('<tool_call>{"name": "weather", "arguments": {"city": "Oslo"}}', False),  # no end
    ("<tool_cal", True), ("<tool_call", True),  # prefixes of the trigger are text
])
def test_membership(text: str, valid: bool) -> None:
    assert _accepts(TAG)(text) == valid


def test_stop_after_first_allows_one_structure() -> None:
    accepts = _accepts({**TAG, "stop_after_first": True})
    assert accepts(f"text {W}") and accepts("only text")
    assert not accepts(f"{W} more") and not accepts(f"{W}{W}")


def test_at_least_one_opens_with_a_structure() -> None:
    accepts = _accepts({**TAG, "at_least_one": True})
    assert accepts(W) and accepts(f"{W} then text {W}") and not accepts(f"text {W}")
    assert not accepts("")
    once = _accepts({**TAG, "at_least_one": True, "stop_after_first": True})
    assert once(W) and not once(f"{W} ") and not once(f"{W}{W}")


def test_overlapping_triggers_fire_at_the_earliest_end() -> None:
    """With triggers '<a' and 'x<a>', the text 'x<a' has already fired '<a'."""
    tag = {"structures": [{"begin": "<a", "schema": {"const": 1}, "end": ">"},
                          {"begin": "x<a>", "schema": {"const": 2}, "end": "!"}],
           "triggers": ["<a", "x<a>"]}
    accepts = _accepts(tag)
    assert accepts("x<a1>") and accepts("<a1>") and not accepts("x<a>2!")


def test_walks_after_the_trigger_give_valid_calls(compiler, tokenizer, vocab) -> None:  # noqa: ANN001
    grammar = compiler.compile(GrammarSpec.structural_tag(TAG))
    validator = jsonschema.Draft202012Validator(WEATHER)
    gen = torch.Generator().manual_seed(7)
    for i in range(6):
        text, _ = random_walk(grammar, tokenizer, vocab, gen, close_after=80,
                              prefix=f"Calling {i}: <tool_call>")
        calls = CALL.findall(text)
        assert calls and len(calls) == text.count("<tool_call>"), text  # every trigger: a call
        for name, arguments in calls:
            args = json.loads(arguments)
            if name == "weather":
                validator.validate(args)
            else:
                assert name == "ping" and args == {}, text


def test_parameters_is_an_alias_of_schema() -> None:
    tag = {"structures": [{"begin": "<f>", "parameters": {"const": 1}, "end": "</f>"}],
           "triggers": ["<f>"]}
    assert _accepts(tag)("x <f>1</f>") and not _accepts(tag)("x <f>2</f>")


@pytest.mark.parametrize("tag, message", [
    ({"structures": [], "triggers": ["<t>"]}, "at least one structure"),
    ({"structures": [{"begin": "<x>", "schema": {}, "end": ""}], "triggers": ["<t>"]},
     "starts with none of the triggers"),
    ({"structures": [{"begin": "<t>", "end": ""}], "triggers": ["<t>"]}, "needs a 'schema'"),
    ({"structures": [{"begin": "<t>", "schema": {}, "end": ""}], "triggers": [""]},
     "non-empty strings"),
    ({"structures": [{"begin": "<t>", "schema": {}, "end": ""}], "triggers": ["<t>"],
      "extra": 1}, "unknown fields"),
    ("{not json", "not valid JSON"),
])
def test_bad_tags_name_the_problem(tag, message: str) -> None:  # noqa: ANN001
    with pytest.raises(GrammarError, match=re.escape(message)):
        GrammarSpec.structural_tag(tag)
