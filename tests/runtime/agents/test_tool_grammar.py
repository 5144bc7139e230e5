"""Grammars for tool_choice: random walks always parse into valid calls of allowed tools."""

from __future__ import annotations

import json

import jsonschema
import pytest
import torch

from radixlm.fsm import CompileBudget, GrammarCompiler
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.runtime.agents.tool_grammar import ToolRequestError, tool_call_grammar
from radixlm.runtime.agents.tool_parser import HermesToolParser, Llama3JsonToolParser
from radixlm.testing.grammar_walk import random_walk

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 10},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 12},
                                           "top": {"type": "array", "items": {"type": "number"},
                                                   "maxItems": 2}},
          "required": ["query"]}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER}},
         {"type": "function", "function": {"name": "search", "parameters": SEARCH}}]
SCHEMAS = {"get_weather": WEATHER, "search": SEARCH}


@pytest.fixture(scope="module")
def compiler(vocab) -> GrammarCompiler:  # noqa: ANN001
    # a generous mask budget: free-text masks of auto grammars are costly on a loaded CPU and
    # tests must not depend on wall-clock speed
    return GrammarCompiler(vocab, CompileBudget(background_warmup_states=0, max_mask_seconds=30))


def _calls(parser, text: str) -> list:  # noqa: ANN001
    out = parser().parse(text)
    for call in out.calls:
        jsonschema.validate(json.loads(call.arguments), SCHEMAS[call.name])
    return out.calls


@pytest.mark.parametrize("parser", [HermesToolParser, Llama3JsonToolParser])
@pytest.mark.parametrize("choice, parallel", [
    ("required", False), ("required", True),
    ({"type": "function", "function": {"name": "search"}}, False)])
def test_forced_calls_always_valid(compiler, tokenizer, vocab, parser, choice,  # noqa: ANN001
                                   parallel: bool) -> None:
    grammar = compiler.compile(tool_call_grammar(TOOLS, choice, parser, parallel))
    gen = torch.Generator().manual_seed(3)
    for _ in range(5):
        text, _ = random_walk(grammar, tokenizer, vocab, gen, close_after=40)
        calls = _calls(parser, text)
        assert calls, text
        assert parallel or len(calls) == 1
        if isinstance(choice, dict):
            assert {c.name for c in calls} == {"search"}


def test_auto_gives_text_or_valid_calls(compiler, tokenizer, vocab) -> None:  # noqa: ANN001
    grammar = compiler.compile(tool_call_grammar(TOOLS, "auto", HermesToolParser))
    gen = torch.Generator().manual_seed(5)
    for prefix in ("", "Let me look. <tool_call>"):
        text, _ = random_walk(grammar, tokenizer, vocab, gen, close_after=60, prefix=prefix)
        calls = _calls(HermesToolParser, text)
        assert len(calls) == text.count("<tool_call>")


def test_whitespace_inside_arguments_stays_bounded(compiler) -> None:  # noqa: ANN001
    grammar = compiler.compile(tool_call_grammar(TOOLS, "required", HermesToolParser, False))
    builder = TermBuilder()
    term = builder.lower(grammar.node)
    begin, end = HermesToolParser.call_begin("search"), HermesToolParser.call_end()
    assert builder.matches(term, f'{begin}{{"query": "x"}}{end}'.encode())
    assert not builder.matches(term, f'{begin}{{{" " * 200}"query": "x"}}{end}'.encode())


@pytest.mark.parametrize("tools, choice, message", [
    ([], "auto", "non-empty list"),
    (TOOLS, "sometimes", "tool_choice: expected one of"),
    (TOOLS, {"type": "function", "function": {"name": "nope"}}, "'nope', which is not among"),
    ([{"type": "function", "function": {"name": "a"}}] * 2, "auto", "repeated: ['a']"),
    ([{"type": "function", "function": {"parameters": {}}}], "auto", "function.name"),
])
def test_bad_requests_named(tools, choice, message: str) -> None:  # noqa: ANN001
    with pytest.raises(ToolRequestError, match=message.replace("[", r"\[").replace("]", r"\]")):
        tool_call_grammar(tools, choice, HermesToolParser)


def test_none_needs_no_grammar() -> None:
    assert tool_call_grammar(TOOLS, "none", HermesToolParser) is None
