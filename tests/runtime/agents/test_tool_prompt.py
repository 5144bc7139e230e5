"""The generic tool rendering for templates without tool support."""

from __future__ import annotations

import json

from radixlm.runtime.agents.tool_parser import HermesToolParser
from radixlm.runtime.agents.tool_prompt import generic_tool_messages, tools_system_text

TOOL = {"type": "function", "function": {"name": "weather", "description": "Forecast",
                                         "parameters": {"type": "object"}}}


def test_system_text_lists_tools_as_json_and_the_call_syntax() -> None:
    text = tools_system_text([TOOL])
    line = next(x for x in text.splitlines() if x.startswith("{\"type\""))
    assert json.loads(line) == TOOL
    assert "<tool_call>" in text and "</tool_call>" in text


def test_conversation_with_calls_and_results_uses_plain_roles() -> None:
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "Weather in Oslo?"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_1", "type": "function",
                     "function": {"name": "weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
                {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
                {"role": "tool", "tool_call_id": "call_2", "content": "warm"}]
    out = generic_tool_messages(messages, [TOOL])
    assert [m["role"] for m in out] == ["system", "user", "assistant", "user"]
    assert out[0]["content"].endswith("Be brief.")
    assert all(set(m) == {"role", "content"} for m in out)
    # the assistant turn is written in the syntax the parser reads back
    calls = HermesToolParser().parse(out[2]["content"]).calls
    assert [(c.name, json.loads(c.arguments)) for c in calls] == [("weather", {"city": "Oslo"})]
    assert out[3]["content"].count("<tool_response>") == 2
