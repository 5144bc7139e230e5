"""``gen(..., tools=...)`` for native backends: the tools become the runtime's structural-tag
constraint over Hermes ``<tool_call>`` calls (one call per gen: a ReAct step), and the output
is parsed back into calls. Lives in the backend layer: the grammar and the parser are the
runtime's (:mod:`radixlm.runtime.agents`)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ...runtime.agents.tool_grammar import tool_call_grammar
from ...runtime.agents.tool_parser import HermesToolParser
from ...runtime.agents.tool_prompt import tools_system_text
from ..sampling import SglSamplingParams


def with_tool_constraint(params: SglSamplingParams) -> SglSamplingParams:
    """``params`` with ``tools``/``tool_choice`` turned into a ``structural_tag``."""
    if not params.tools:
        return params
    spec = tool_call_grammar(params.tools, params.tool_choice or "required", HermesToolParser,
                             parallel_tool_calls=False)
    return dataclasses.replace(params, structural_tag=spec.value, tools=None, tool_choice=None)


def parse_tool_calls(text: str) -> list[dict[str, Any]]:
    """The calls in a gen's output: ``{"name": ..., "arguments": {...}}`` each."""
    calls = HermesToolParser().parse(text).calls
    return [{"name": c.name, "arguments": json.loads(c.arguments)} for c in calls]


def tools_prompt(tools: list[dict[str, Any]]) -> str:
    """The tool section to put in a program's system prompt (the generic rendering the
    OpenAI route uses for templates without tools), naming the ``<tool_call>`` syntax."""
    return tools_system_text(tools)
