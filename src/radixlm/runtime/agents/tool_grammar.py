"""The grammar that enforces ``tool_choice``: a structural tag over the parser's call syntax.

- ``"none"``: no grammar (the tools are still in the prompt; the output is not parsed).
- ``"auto"``: free text; once the parser's trigger (``<tool_call>``) is generated, the rest
  of a call is forced: the wrapper, a function name among the tools, arguments valid for that
  function's ``parameters`` schema, the closing marker; then text again.
- ``"required"`` / ``{"type": "function", "function": {"name": ...}}``: the output opens with
  a call (no text first) to any tool / to that tool; with ``parallel_tool_calls`` more calls
  may follow, otherwise the output ends after the first.

Arguments are JSON compiled by our JSON Schema compiler with its bounded default white space,
so a model cannot loop on white space inside a call.
"""

from __future__ import annotations

from typing import Any

from ...fsm import GrammarSpec
from .tool_parser import ToolParser

TOOL_CHOICES = ("none", "auto", "required")


class ToolRequestError(ValueError):
    """``tools`` / ``tool_choice`` are malformed (the message names the field)."""


def function_specs(tools: Any) -> list[dict[str, Any]]:
    """The ``function`` objects of ``tools``, validated (name, optional parameters)."""
    if not isinstance(tools, list) or not tools:
        raise ToolRequestError("tools: expected a non-empty list of {'type': 'function', "
                               "'function': {...}} objects")
    out = []
    for i, tool in enumerate(tools):
        fn = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(tool, dict) or tool.get("type", "function") != "function" or \
                not isinstance(fn, dict):
            raise ToolRequestError(f"tools[{i}]: expected {{'type': 'function', 'function': "
                                   f"{{'name': ..., 'parameters': ...}}}}")
        name = fn.get("name")
        if not isinstance(name, str) or not name or '"' in name or "\\" in name:
            raise ToolRequestError(f"tools[{i}].function.name: expected a non-empty name "
                                   f"without quotes or backslashes, got {name!r}")
        params = fn.get("parameters", {"type": "object"})
        if not isinstance(params, (dict, bool)):
            raise ToolRequestError(f"tools[{i}].function.parameters: expected a JSON Schema "
                                   f"object, got {type(params).__name__}")
        out.append({**fn, "parameters": params})
    names = [f["name"] for f in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise ToolRequestError(f"tools: function names must be unique, repeated: {dupes}")
    return out


def chosen_function(tool_choice: Any) -> str | None:
    """The name a named ``tool_choice`` forces (None for the string choices)."""
    if isinstance(tool_choice, str):
        if tool_choice not in TOOL_CHOICES:
            raise ToolRequestError(f"tool_choice: expected one of {TOOL_CHOICES} or "
                                   f"{{'type': 'function', 'function': {{'name': ...}}}}, got "
                                   f"{tool_choice!r}")
        return None
    fn = tool_choice.get("function") if isinstance(tool_choice, dict) else None
    name = fn.get("name") if isinstance(fn, dict) else None
    if not isinstance(name, str):
        raise ToolRequestError(f"tool_choice: expected {{'type': 'function', 'function': "
                               f"{{'name': ...}}}}, got {tool_choice!r}")
    return name


def tool_call_grammar(tools: Any, tool_choice: Any, parser: type[ToolParser],
                      parallel_tool_calls: bool = True) -> GrammarSpec | None:
    """The constraint for a request's tools (see the module docstring); None for "none"."""
    functions = function_specs(tools)
    name = chosen_function(tool_choice)
    if tool_choice == "none":
        return None
    if name is not None:
        functions = [f for f in functions if f["name"] == name]
        if not functions:
            raise ToolRequestError(f"tool_choice names function {name!r}, which is not among "
                                   f"the tools")
    trigger = parser.trigger
    structures = []
    for fn in functions:
        begin = parser.call_begin(fn["name"])
        if not begin.startswith(trigger):
            begin = trigger + begin  # e.g. Llama-3: <|python_tag|>{"name": ...
        structures.append({"begin": begin, "schema": fn["parameters"],
                           "end": parser.call_end()})
    forced = tool_choice != "auto"
    return GrammarSpec.structural_tag({"structures": structures, "triggers": [trigger],
                                       "at_least_one": forced,
                                       "stop_after_first": not parallel_tool_calls})
