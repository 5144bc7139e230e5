"""Tools in the prompt for chat templates without tool support (the generic rendering).

The system message gets this text (before any system text the request has)::

    # Tools

    You may call one or more functions to assist with the user query.

    You are provided with function signatures within <tools></tools> XML tags:
    <tools>
    {"type": "function", "function": {"name": ..., "description": ..., "parameters": ...}}
    </tools>

    For each function call, return a json object with function name and arguments within
    <tool_call></tool_call> XML tags:
    <tool_call>
    {"name": <function-name>, "arguments": <args-json-object>}
    </tool_call>

(the Hermes convention, which :class:`HermesToolParser` reads). Tool results (``role:
"tool"`` messages) become user turns wrapped in ``<tool_response>`` tags, and assistant
turns that called tools get their calls written back in the same syntax, so a template that
knows only system/user/assistant can render the whole conversation.
"""

from __future__ import annotations

import json
from typing import Any

TOOLS_HEADER = ("# Tools\n\nYou may call one or more functions to assist with the user query."
                "\n\nYou are provided with function signatures within <tools></tools> XML "
                "tags:\n<tools>\n")
TOOLS_FOOTER = ("\n</tools>\n\nFor each function call, return a json object with function "
                "name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n"
                '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')


def tools_system_text(tools: list[dict[str, Any]]) -> str:
    """The tool section of the system message (see the module docstring)."""
    lines = [json.dumps(t, ensure_ascii=False) for t in tools]
    return TOOLS_HEADER + "\n".join(lines) + TOOLS_FOOTER


def render_call(name: str, arguments: str) -> str:
    """One call in the generic syntax (for assistant turns of the history)."""
    try:
        args: Any = json.loads(arguments) if arguments else {}
    except json.JSONDecodeError:
        args = arguments
    call = {"name": name, "arguments": args}
    return f"<tool_call>\n{json.dumps(call, ensure_ascii=False)}\n</tool_call>"


def generic_tool_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]]
                          ) -> list[dict[str, Any]]:
    """``messages`` rewritten for a template without tool support (plain roles only)."""
    out: list[dict[str, Any]] = []
    system = tools_system_text(tools) if tools else ""
    rest = messages
    if messages and messages[0].get("role") == "system":
        first = messages[0].get("content") or ""
        system = f"{system}\n\n{first}" if system else first
        rest = messages[1:]
    if system:
        out.append({"role": "system", "content": system})
    for m in rest:
        role = m.get("role")
        if role == "tool":
            text = f"<tool_response>\n{m.get('content') or ''}\n</tool_response>"
            if out and out[-1]["role"] == "user" and out[-1].get("_tool"):
                out[-1]["content"] += "\n" + text  # several results: one user turn
            else:
                out.append({"role": "user", "content": text, "_tool": True})
        elif role == "assistant" and m.get("tool_calls"):
            calls = [render_call(c["function"]["name"], c["function"].get("arguments") or "")
                     for c in m["tool_calls"]]
            text = "\n".join(([m["content"]] if m.get("content") else []) + calls)
            out.append({"role": "assistant", "content": text})
        else:
            out.append({k: v for k, v in m.items() if k in ("role", "content")})
    return [{k: v for k, v in m.items() if k != "_tool"} for m in out]
