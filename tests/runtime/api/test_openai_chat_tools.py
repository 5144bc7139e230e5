"""Planning a chat request with tools/reasoning (no server): which rendering, which parser,
which constraint, where the reasoning starts."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from radixlm.runtime.api.openai_api import ChatRequest
from radixlm.runtime.api.openai_chat_tools import plan_chat

TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"x": {"type": "integer"}}}}}]
HISTORY = [{"role": "user", "content": "hi"},
           {"role": "assistant", "content": None, "tool_calls": [
               {"id": "call_1", "type": "function",
                "function": {"name": "f", "arguments": '{"x": 1}'}}]},
           {"role": "tool", "tool_call_id": "call_1", "content": "42"}]
TOOL_TEMPLATE = ("{{ tools | tojson }}|{% for m in messages %}{{ m.role }}:"
                 "{% if m.tool_calls %}{{ m.tool_calls[0].function.arguments.x }}"
                 "{% else %}{{ m.content }}{% endif %};{% endfor %}")


def _plan(tokenizer, template=None, parser=None, reasoning=None, **body):  # noqa: ANN001, ANN202
    args = SimpleNamespace(chat_template=template, tool_call_parser=parser,
                           reasoning_parser=reasoning, max_prompt_chars=10**6,
                           allow_client_chat_template=False)
    req = ChatRequest.model_validate({"messages": HISTORY, **body})
    return plan_chat(SimpleNamespace(args=args, tokenizer=tokenizer), req)


def test_a_template_with_tools_gets_them_and_object_arguments(tokenizer) -> None:  # noqa: ANN001
    plan = _plan(tokenizer, TOOL_TEMPLATE, tools=TOOLS)
    tools_json, _, turns = plan.prompt.partition("|")
    assert json.loads(tools_json) == TOOLS
    assert turns == "user:hi;assistant:1;tool:42;"


def test_a_template_without_tools_gets_the_generic_rendering(tokenizer) -> None:  # noqa: ANN001
    plan = _plan(tokenizer, tools=TOOLS)
    assert "<tools>" in plan.prompt and '"name": "f"' in plan.prompt
    assert '<tool_call>\n{"name": "f", "arguments": {"x": 1}}\n</tool_call>' in plan.prompt
    assert "<tool_response>\n42\n</tool_response>" in plan.prompt
    assert plan.tool_parser.name == "hermes" and "structural_tag" in plan.grammar


def test_the_parser_flag_picks_the_call_syntax(tokenizer) -> None:  # noqa: ANN001
    plan = _plan(tokenizer, parser="llama3", tools=TOOLS, tool_choice="required")
    tag = json.loads(plan.grammar["structural_tag"])
    assert tag["at_least_one"] and tag["structures"][0]["begin"].startswith(
        '<|python_tag|>{"name": "f", "parameters": ')


@pytest.mark.parametrize("ending, opens, after", [
    ("<think>\n", True, "</think>"), ("<think>\n\n</think>\n\n", None, None),
    ("", False, "</think>")])
def test_reasoning_follows_the_prompt_end(tokenizer, ending: str, opens, after) -> None:  # noqa: ANN001
    template = ("{% for m in messages %}{{ m.content }}{% endfor %}"
                "{% if add_generation_prompt %}" + json.dumps(ending)[1:-1] + "{% endif %}")
    plan = _plan(tokenizer, template.replace("\\n", "\n"), reasoning="qwen3")
    assert plan.constraint_after == after
    assert (None if plan.reasoning is None else plan.reasoning.starts_in_reasoning) == opens
