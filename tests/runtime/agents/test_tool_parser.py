"""Tool-call parsers on outputs in the formats real models write, streamed in pieces of
every size and whole: the same content and calls either way."""

from __future__ import annotations

import itertools
import json

import pytest

from radixlm.runtime.agents.events import ContentDelta, ToolCallDelta, merge_calls
from radixlm.runtime.agents.tool_parser import (
    HermesToolParser,
    Llama3JsonToolParser,
    detect_tool_parser,
    tool_parser_class,
)

QWEN_TWO_CALLS = (
    "I'll check both.\n<tool_call>\n{\"name\": \"get_current_temperature\", \"arguments\": "
    "{\"location\": \"San Francisco, CA, USA\"}}\n</tool_call>\n<tool_call>\n{\"name\": "
    "\"get_temperature_date\", \"arguments\": {\"location\": \"San Francisco, CA, USA\", "
    "\"date\": \"2024-10-01\", \"unit\": \"celsius\"}}\n</tool_call>")
HERMES_ARGS_FIRST = ('<tool_call>\n{"arguments": {"symbol": "TSLA"}, "name": '
                     '"get_stock_fundamentals"}\n</tool_call>')
LLAMA_PLAIN = ('{"name": "get_current_conditions", "parameters": {"location": "San Francisco, '
               'CA", "unit": "Fahrenheit"}}')
LLAMA_TAG = '<|python_tag|>{"name": "brave_search", "parameters": {"query": "a \\"b\\" {c}"}}'
LLAMA_TWO = ('{"name": "a", "parameters": {"x": [1, {"y": 2}]}}; {"name": "b", "parameters": '
             '{}}')

CASES = [
    (HermesToolParser, QWEN_TWO_CALLS, "I'll check both.",
     [("get_current_temperature", {"location": "San Francisco, CA, USA"}),
      ("get_temperature_date", {"location": "San Francisco, CA, USA", "date": "2024-10-01",
                                "unit": "celsius"})]),
    (HermesToolParser, HERMES_ARGS_FIRST, "", [("get_stock_fundamentals", {"symbol": "TSLA"})]),
    (HermesToolParser, "No tools needed: 2 < 3 and <tool is fine.",
     "No tools needed: 2 < 3 and <tool is fine.", []),
    (HermesToolParser, "<tool_call>\n{not json}\n</tool_call>", "<tool_call>\n{not json}", []),
    (Llama3JsonToolParser, LLAMA_PLAIN, "",
     [("get_current_conditions", {"location": "San Francisco, CA", "unit": "Fahrenheit"})]),
    (Llama3JsonToolParser, LLAMA_TAG, "", [("brave_search", {"query": 'a "b" {c}'})]),
    (Llama3JsonToolParser, LLAMA_TWO, "", [("a", {"x": [1, {"y": 2}]}), ("b", {})]),
    (Llama3JsonToolParser, "The answer is {42}.", "The answer is {42}.", []),
]


def _ids():  # noqa: ANN202
    counter = itertools.count()
    return lambda: f"call_{next(counter)}"


def _stream(cls, text: str, size: int):  # noqa: ANN001, ANN202
    parser = cls(_ids())
    events = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i:i + size])
    return events + parser.finish()


@pytest.mark.parametrize("size", [1, 2, 5, 13, 10_000])
@pytest.mark.parametrize("case", range(len(CASES)))
def test_streamed_and_whole_agree(case: int, size: int) -> None:
    cls, text, content, calls = CASES[case]
    whole = cls(_ids()).parse(text)
    assert whole.content == content
    assert [(c.name, json.loads(c.arguments)) for c in whole.calls] == calls
    events = _stream(cls, text, size)
    streamed = "".join(e.text for e in events if isinstance(e, ContentDelta))
    assert streamed.strip() == content
    assert merge_calls(events) == whole.calls  # same ids, names and argument text


def test_deltas_look_like_openai_stream() -> None:
    """First piece of a call: id and name with empty arguments; then only arguments."""
    events = [e for e in _stream(HermesToolParser, QWEN_TWO_CALLS, 4)
              if isinstance(e, ToolCallDelta)]
    for index in (0, 1):
        pieces = [e for e in events if e.index == index]
        assert pieces[0].id == f"call_{index}" and pieces[0].name and pieces[0].arguments == ""
        assert all(p.id is None and p.name is None for p in pieces[1:])
        assert len(pieces) > 3  # the arguments arrived in several pieces


def test_content_before_a_call_streams_before_it_ends() -> None:
    parser = HermesToolParser(_ids())
    assert parser.feed("Sure, <tool") == [ContentDelta("Sure, ")]
    assert parser.feed('_call>\n{"name": "f"') == []
    assert parser.feed(', "arguments": {') == [ToolCallDelta(0, "", "call_0", "f"),
                                                  ToolCallDelta(0, "{")]


def test_registry_and_detection() -> None:
    assert tool_parser_class("qwen") is HermesToolParser
    with pytest.raises(ValueError, match="unknown tool-call parser 'mistral'"):
        tool_parser_class("mistral")
    assert detect_tool_parser("{{ '<|python_tag|>' }}") is Llama3JsonToolParser
    assert detect_tool_parser(None) is HermesToolParser


@pytest.mark.parametrize("cls", [HermesToolParser, Llama3JsonToolParser])
def test_call_syntax_is_what_the_parser_reads(cls) -> None:  # noqa: ANN001
    text = cls.call_begin("f") + '{"a": 1}' + cls.call_end() + cls.call_separator() + \
        cls.call_begin("g") + "{}" + cls.call_end()
    calls = cls(_ids()).parse(text).calls
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("f", {"a": 1}), ("g", {})]
