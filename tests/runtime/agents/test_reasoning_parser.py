"""The reasoning parser splits <think> text from the answer, streamed in any pieces."""

from __future__ import annotations

import pytest

from radixlm.runtime.agents.events import ContentDelta, ReasoningDelta
from radixlm.runtime.agents.reasoning_parser import (
    ReasoningParser,
    reasoning_format,
)

CASES = [
    ("qwen3", "<think>\nLet me add 2 and 2.\n</think>\n\nThe answer is 4.",
     "\nLet me add 2 and 2.\n", "The answer is 4."),
    ("qwen3", "The answer is 4.", "", "The answer is 4."),
    ("qwen3", "<think>unfinished", "unfinished", ""),
    ("qwen3", "<think></think>{\"a\": 1}", "", "{\"a\": 1}"),
    ("deepseek-r1", "Okay, so 2+2 </think> is 4 </think>", "Okay, so 2+2 ", "is 4 </think>"),
    ("qwen3", "  <thi", "", "  <thi"),
]


@pytest.mark.parametrize("size", [1, 3, 8, 1000])
@pytest.mark.parametrize("name, text, reasoning, content", CASES)
def test_split(name: str, text: str, reasoning: str, content: str, size: int) -> None:
    assert ReasoningParser(reasoning_format(name)).parse(text) == (reasoning, content)
    parser = ReasoningParser(reasoning_format(name))
    events = []
    for i in range(0, len(text), size):
        events += parser.feed(text[i:i + size])
    events += parser.finish()
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == reasoning
    assert "".join(e.text for e in events if isinstance(e, ContentDelta)) == content


def test_reasoning_streams_before_the_end_marker() -> None:
    parser = ReasoningParser(reasoning_format("qwen3"))
    assert parser.feed("<think>abc</th") == [ReasoningDelta("abc")]
    assert parser.feed("ink>x") == [ContentDelta("x")]


def test_unknown_parser_named() -> None:
    with pytest.raises(ValueError, match="unknown reasoning parser 'o1'"):
        reasoning_format("o1")
