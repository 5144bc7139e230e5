"""Tools in ``@function`` programs: ``gen(..., tools=..., tool_choice=...)`` constrains the
output to a call of one of the tools and hands back the parsed call; a ReAct loop runs a
Python tool on each call and feeds the observation back (tiny model, in-process engine)."""

from __future__ import annotations

import jsonschema
import pytest

import radixlm as sgl
from radixlm.lang.backend.engine_backend import EngineBackend

ADD = {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 99},
                                        "b": {"type": "integer", "minimum": 0, "maximum": 99}},
       "required": ["a", "b"], "additionalProperties": False}
LOOKUP = {"type": "object", "properties": {"key": {"type": "string", "maxLength": 8}},
          "required": ["key"], "additionalProperties": False}
TOOLS = [{"type": "function", "function": {"name": "add", "parameters": ADD}},
         {"type": "function", "function": {"name": "lookup", "parameters": LOOKUP}}]
PYTHON_TOOLS = {"add": lambda a, b: str(a + b), "lookup": lambda key: f"no entry for {key}"}
SCHEMAS = {"add": ADD, "lookup": LOOKUP}


@sgl.function
def react(s, question: str, steps: int = 3):  # noqa: ANN001
    s += sgl.system(sgl.tools_prompt(TOOLS))
    s += sgl.user(question)
    for i in range(steps):
        s += sgl.assistant(sgl.gen(f"call_{i}", tools=TOOLS, max_tokens=60))
        [call] = s.get_meta_info(f"call_{i}")["tool_calls"]
        s[f"observation_{i}"] = PYTHON_TOOLS[call["name"]](**call["arguments"])
        s += sgl.user("<tool_response>\n" + s[f"observation_{i}"] + "\n</tool_response>")


def test_react_loop_calls_python_tools(engine) -> None:  # noqa: ANN001
    state = react.run("What is 2 + 3?", backend=EngineBackend(engine), temperature=0.8)
    for i in range(3):
        [call] = state.get_meta_info(f"call_{i}")["tool_calls"]
        jsonschema.validate(call["arguments"], SCHEMAS[call["name"]])
        assert state[f"call_{i}"].startswith("<tool_call>")
        assert f"<tool_response>\n{state[f'observation_{i}']}" in state.text()


def test_named_tool_choice_forces_that_tool(engine) -> None:  # noqa: ANN001
    @sgl.function
    def one(s):  # noqa: ANN001
        s += "Look up Oslo. " + sgl.gen("call", tools=TOOLS, max_tokens=60, tool_choice={
            "type": "function", "function": {"name": "lookup"}})

    state = one.run(backend=EngineBackend(engine), temperature=1.0)
    [call] = state.get_meta_info("call")["tool_calls"]
    assert call["name"] == "lookup"
    jsonschema.validate(call["arguments"], LOOKUP)


def test_tool_choice_without_tools_is_refused() -> None:
    with pytest.raises(ValueError, match="tool_choice needs tools"):
        sgl.gen("x", tool_choice="required")
