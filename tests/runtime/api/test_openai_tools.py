"""Function calling through ``/v1/chat/completions`` with the official ``openai`` client on a
live tiny-model server (its template has no tool section: the generic rendering is used and
the Hermes parser is detected): forced calls always validate, auto gives text or a valid
call, streamed calls reassemble to the non-streamed one, tool results continue the chat."""

from __future__ import annotations

import json

import jsonschema
import openai
import pytest

WEATHER = {"type": "object", "properties": {
    "city": {"type": "string", "maxLength": 12},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit"], "additionalProperties": False}
SEARCH = {"type": "object", "properties": {"query": {"type": "string", "maxLength": 16}},
          "required": ["query"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                           "parameters": WEATHER}},
         {"type": "function", "function": {"name": "search", "parameters": SEARCH}}]
SCHEMAS = {"get_weather": WEATHER, "search": SEARCH}
ASK = [{"role": "user", "content": "What is the weather in Oslo?"}]
SEARCH_CHOICE = {"type": "function", "function": {"name": "search"}}


@pytest.fixture(scope="module")
def client(tiny_llama_path, start_server) -> openai.OpenAI:
    url = start_server("--model-path", str(tiny_llama_path))
    return openai.OpenAI(base_url=f"{url}/v1", api_key="unused")


def _ask(client: openai.OpenAI, **kw):  # noqa: ANN202
    args = {"model": "default", "messages": ASK, "tools": TOOLS, "max_tokens": 80, **kw}
    return client.chat.completions.create(**args)


def _valid(call) -> None:  # noqa: ANN001
    assert call.type == "function" and call.id.startswith("call_")
    jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])


@pytest.mark.parametrize("choice", ["required", SEARCH_CHOICE], ids=["required", "named"])
@pytest.mark.parametrize("temperature", [0.0, 0.8, 1.5])
def test_forced_calls_always_validate(client, choice, temperature: float) -> None:  # noqa: ANN001
    for seed in range(3):
        reply = _ask(client, tool_choice=choice, temperature=temperature, seed=seed,
                     parallel_tool_calls=False)
        choice0 = reply.choices[0]
        assert choice0.finish_reason == "tool_calls", choice0
        assert choice0.message.content is None
        [call] = choice0.message.tool_calls
        _valid(call)
        if isinstance(choice, dict):
            assert call.function.name == "search"


def test_parallel_calls_each_validate(client) -> None:  # noqa: ANN001
    reply = _ask(client, tool_choice="required", temperature=1.0, seed=4, max_tokens=300)
    calls = reply.choices[0].message.tool_calls
    assert calls
    complete = calls if reply.choices[0].finish_reason == "tool_calls" else calls[:-1]
    for call in complete:
        _valid(call)


def test_auto_gives_text_or_a_valid_call(client) -> None:  # noqa: ANN001
    for seed in range(2):
        message = _ask(client, tool_choice="auto", temperature=1.0, seed=seed,
                       max_tokens=24).choices[0].message
        for call in message.tool_calls or []:
            _valid(call)
        assert message.tool_calls or message.content


def test_none_is_plain_text(client) -> None:  # noqa: ANN001
    reply = _ask(client, tool_choice="none", temperature=0, max_tokens=12).choices[0]
    assert reply.message.tool_calls is None and reply.finish_reason in ("stop", "length")


@pytest.mark.parametrize("choice", ["required", SEARCH_CHOICE], ids=["required", "named"])
def test_streamed_call_reassembles_to_the_same_call(client, choice) -> None:  # noqa: ANN001
    whole = _ask(client, tool_choice=choice, temperature=0.9, seed=7).choices[0]
    chunks = list(_ask(client, tool_choice=choice, temperature=0.9, seed=7, stream=True))
    calls: dict[int, dict] = {}
    finish, content = None, ""
    for chunk in chunks:
        for c in chunk.choices:
            finish = c.finish_reason or finish
            content += c.delta.content or ""
            for piece in c.delta.tool_calls or []:
                entry = calls.setdefault(piece.index, {"id": None, "name": "", "args": ""})
                if piece.id:
                    assert entry["id"] is None and piece.type == "function"
                    entry["id"], entry["name"] = piece.id, piece.function.name
                entry["args"] += piece.function.arguments or ""
    assert finish == whole.finish_reason
    assert (content.strip() or None) == whole.message.content
    assert [(c["name"], c["args"]) for c in calls.values()] == \
        [(c.function.name, c.function.arguments) for c in whole.message.tool_calls]


def test_a_tool_result_turn_continues_the_conversation(client) -> None:  # noqa: ANN001
    first = _ask(client, tool_choice="required", temperature=0, parallel_tool_calls=False)
    call = first.choices[0].message.tool_calls[0]
    history = ASK + [first.choices[0].message.model_dump(exclude_none=True),
                     {"role": "tool", "tool_call_id": call.id, "content": '{"temp": 7}'}]
    reply = _ask(client, messages=history, temperature=0, max_tokens=8)
    assert reply.usage.prompt_tokens > first.usage.prompt_tokens + 10
    assert reply.choices[0].finish_reason in ("stop", "length", "tool_calls")
    forced = _ask(client, messages=history, tool_choice=SEARCH_CHOICE, temperature=0)
    _valid(forced.choices[0].message.tool_calls[0])


@pytest.mark.parametrize("kw, needle", [
    ({"tool_choice": {"type": "function", "function": {"name": "nope"}}}, "nope"),
    ({"tool_choice": "sometimes"}, "tool_choice"),
    ({"tools": None, "tool_choice": "required"}, "requires 'tools'"),
    ({"tools": [{"type": "function", "function": {"name": 'a"b'}}]}, "name"),
    ({"response_format": {"type": "json_object"}, "tool_choice": "auto"}, "response_format"),
])
def test_bad_tool_requests_are_refused_by_name(client, kw: dict, needle: str) -> None:  # noqa: ANN001
    with pytest.raises(openai.BadRequestError) as info:
        _ask(client, **kw)
    assert needle in str(info.value)
