"""Function calling on the real SmolLM2-135M-Instruct through the ``openai`` client (its
template has no tool section: the generic rendering puts the tools in the system message):
forced calls validate over seeds and temperatures, auto is text or a valid call, a streamed
call reassembles to the non-streamed one, and a tool result continues the chat."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 16},
    "unit": {"enum": ["celsius", "fahrenheit"]}},
    "required": ["city", "unit"], "additionalProperties": False}
TIME = {"type": "object", "properties": {"zone": {"type": "string", "maxLength": 16}},
        "required": ["zone"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": WEATHER,
                                           "description": "Current weather in a city"}},
         {"type": "function", "function": {"name": "get_time", "parameters": TIME,
                                           "description": "Current time in a time zone"}}]
SCHEMAS = {"get_weather": WEATHER, "get_time": TIME}
ASK = [{"role": "user", "content": "What is the weather like in Paris today?"}]


@pytest.fixture(scope="module")
def client(real_model, start_server) -> openai.OpenAI:  # noqa: ANN001
    url = start_server("--model-path", str(real_model.gguf), "--quantization", "none",
                       "--max-total-tokens", "8192",
                       env={"RADIXLM_CACHE_DIR": str(real_model.cache_dir)})
    return openai.OpenAI(base_url=url + "/v1", api_key="unused")


def _ask(client: openai.OpenAI, **kw):  # noqa: ANN202
    return client.chat.completions.create(**{"model": "default", "messages": ASK,
                                             "tools": TOOLS, "max_tokens": 60, **kw})


def _valid_call(choice) -> tuple[str, str]:  # noqa: ANN001
    assert choice.finish_reason == "tool_calls", choice
    [call] = choice.message.tool_calls
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    return call.function.name, call.function.arguments


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_forced_calls_validate(client, temperature: float) -> None:  # noqa: ANN001
    for seed in (0, 1):
        _valid_call(_ask(client, tool_choice="required", parallel_tool_calls=False,
                         temperature=temperature, seed=seed).choices[0])
    named = {"type": "function", "function": {"name": "get_time"}}
    name, _ = _valid_call(_ask(client, tool_choice=named, temperature=temperature,
                               seed=2, parallel_tool_calls=False).choices[0])
    assert name == "get_time"


def test_auto_is_text_or_a_valid_call(client) -> None:  # noqa: ANN001
    choice = _ask(client, tool_choice="auto", temperature=0, max_tokens=40).choices[0]
    for call in choice.message.tool_calls or []:
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    assert choice.message.tool_calls or choice.message.content


def test_streamed_call_and_tool_result_turn(client) -> None:  # noqa: ANN001
    kw = {"tool_choice": "required", "parallel_tool_calls": False, "temperature": 0.7,
          "seed": 5}
    whole = _ask(client, **kw).choices[0]
    expected = _valid_call(whole)
    name, args = None, ""
    for chunk in _ask(client, stream=True, **kw):
        for piece in (chunk.choices[0].delta.tool_calls or []) if chunk.choices else []:
            name = piece.function.name or name
            args += piece.function.arguments or ""
    assert (name, args) == expected
    history = ASK + [whole.message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": whole.message.tool_calls[0].id,
                      "content": '{"temperature": 18, "sky": "clear"}'}]
    reply = _ask(client, messages=history, tool_choice="none", temperature=0,
                 max_tokens=24).choices[0]
    assert reply.message.content and reply.finish_reason in ("stop", "length")
