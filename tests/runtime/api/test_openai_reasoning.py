"""Reasoning output through ``/v1/chat/completions`` (``--reasoning-parser qwen3`` and an
operator-supplied chat template that opens the assistant turn with ``<think>``), on a tiny
model that always writes ``Let me see.</think>`` first (see :mod:`thinking_model`):
``reasoning_content`` and ``content`` are separated, streamed and not, and constraints
(``response_format``, forced tool calls) start only after ``</think>``."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest
from thinking_model import REASONING, THINK_TEMPLATE, build_thinking_model

SCHEMA = {"type": "object", "properties": {"answer": {"enum": ["yes", "no"]}},
          "required": ["answer"], "additionalProperties": False}
JSON_FORMAT = {"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}}
TOOL = {"type": "function", "function": {"name": "lookup", "parameters": {
    "type": "object", "properties": {"key": {"type": "string", "maxLength": 8}},
    "required": ["key"], "additionalProperties": False}}}
ASK = [{"role": "user", "content": "Is Oslo in Norway?"}]


@pytest.fixture(scope="module")
def client(tiny_llama_path, tokenizer, start_server, tmp_path_factory) -> openai.OpenAI:  # noqa: ANN001
    root = tmp_path_factory.mktemp("thinking")
    model = build_thinking_model(tiny_llama_path, root / "model", tokenizer)
    template = root / "think.jinja"
    template.write_text(THINK_TEMPLATE)
    url = start_server("--model-path", str(model), "--reasoning-parser", "qwen3",
                       "--chat-template", str(template))
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused")


def _ask(client: openai.OpenAI, **kw):  # noqa: ANN202
    return client.chat.completions.create(**{"model": "default", "messages": ASK, "max_tokens": 40,
                                             "temperature": 0, **kw})


def _streamed(client: openai.OpenAI, **kw) -> tuple[str, str, str | None]:
    reasoning, content, finish = "", "", None
    for chunk in _ask(client, stream=True, **kw):
        for c in chunk.choices:
            delta = c.delta.model_dump()
            reasoning += delta.get("reasoning_content") or ""
            content += delta.get("content") or ""
            finish = c.finish_reason or finish
    return reasoning, content, finish


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_json_constraint_starts_after_the_reasoning(client, stream: bool) -> None:  # noqa: ANN001
    if stream:
        reasoning, content, finish = _streamed(client, response_format=JSON_FORMAT)
    else:
        choice = _ask(client, response_format=JSON_FORMAT).choices[0]
        message = choice.message.model_dump()
        reasoning, content, finish = message["reasoning_content"], message["content"], \
            choice.finish_reason
    assert reasoning.strip() == REASONING  # the model's </think> was not blocked
    jsonschema.validate(json.loads(content), SCHEMA)  # the JSON is in content, whole
    assert finish == "stop"


def test_unconstrained_reasoning_is_separated(client) -> None:  # noqa: ANN001
    whole = _ask(client, max_tokens=16).choices[0].message.model_dump()
    assert whole["reasoning_content"].strip() == REASONING
    assert REASONING not in whole["content"]
    reasoning, content, _ = _streamed(client, max_tokens=16)
    assert (reasoning, content) == (whole["reasoning_content"], whole["content"])


def test_forced_tool_call_after_the_reasoning(client) -> None:  # noqa: ANN001
    for stream in (False, True):
        kw = {"tools": [TOOL], "tool_choice": "required", "parallel_tool_calls": False,
              "max_tokens": 120}
        if stream:
            reasoning, content, finish = _streamed(client, **kw)
            assert not content.strip()
        else:
            choice = _ask(client, **kw).choices[0]
            reasoning, finish = choice.message.model_dump()["reasoning_content"], \
                choice.finish_reason
            [call] = choice.message.tool_calls
            assert call.function.name == "lookup"
            jsonschema.validate(json.loads(call.function.arguments),
                                TOOL["function"]["parameters"])
        assert reasoning.strip() == REASONING and finish == "tool_calls"


def test_separate_reasoning_false_keeps_it_in_content(client) -> None:  # noqa: ANN001
    message = _ask(client, response_format=JSON_FORMAT,
                   extra_body={"separate_reasoning": False}).choices[0].message.model_dump()
    assert message.get("reasoning_content") is None
    head, _, tail = message["content"].partition("</think>")
    assert head.strip() == REASONING
    jsonschema.validate(json.loads(tail), SCHEMA)


def test_enable_thinking_false_constrains_from_the_start(client) -> None:  # noqa: ANN001
    message = _ask(client, response_format=JSON_FORMAT, extra_body={
        "chat_template_kwargs": {"enable_thinking": False}}).choices[0].message.model_dump()
    assert message.get("reasoning_content") is None
    jsonschema.validate(json.loads(message["content"]), SCHEMA)
