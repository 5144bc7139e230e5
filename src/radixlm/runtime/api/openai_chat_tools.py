"""Tools and reasoning for ``/v1/chat/completions``: the prompt, the constraint, the output.

:func:`plan_chat` turns a chat request into a :class:`ChatPlan`:

- **prompt**: the messages (``role: "tool"`` results, assistant turns carrying
  ``tool_calls``) rendered by the model's chat template, with ``tools=`` when the template
  uses a ``tools`` variable, otherwise through the generic rendering of
  :mod:`radixlm.runtime.agents.tool_prompt` (Hermes ``<tool_call>`` syntax in the system
  message), so a template that knows only system/user/assistant still gets the tools;
- **constraint**: ``tool_choice`` "required" and named calls are forced by the grammar of
  :func:`~radixlm.runtime.agents.tool_grammar.tool_call_grammar` (never degraded to "auto");
  "auto" is free text with the call constrained once the parser's marker appears; "none" is
  unconstrained and unparsed;
- **reasoning** (``--reasoning-parser``): the constraint (tools or ``response_format``)
  starts after the reasoning end marker, per request; a prompt that already closes the
  reasoning (a template with ``enable_thinking=False``) is constrained from the start, and one
  that opens it (the template ends the prompt with ``<think>``) starts inside the reasoning.

:class:`ChoiceDecoder` splits one choice's output into reasoning, content and tool calls;
whole outputs are the same machine fed once, so streamed and non-streamed replies agree.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..agents.events import ContentDelta, ReasoningDelta, StreamEvent, ToolCallDelta, merge_calls
from ..agents.reasoning_parser import ReasoningFormat, ReasoningParser, reasoning_format
from ..agents.tool_grammar import ToolRequestError, function_specs, tool_call_grammar
from ..agents.tool_parser import ToolParser, detect_tool_parser, tool_parser_class
from ..agents.tool_prompt import generic_tool_messages
from .generate_request import RequestValidationError
from .template_budget import TemplateBudgetExceeded, run_with_step_budget

MESSAGE_KEYS = ("role", "content", "name", "tool_calls", "tool_call_id")
CLIENT_TEMPLATE_MAX_STEPS = 1_000_000  # lines a client-supplied chat template may execute
RESERVED_TEMPLATE_KWARGS = ("tokenize", "add_generation_prompt", "conversation", "messages")


@dataclass(frozen=True)
class ChatPlan:
    """How one chat request is prompted, constrained and parsed."""

    prompt: str
    grammar: dict[str, Any]  # sampling params of the tool constraint ({} when none)
    tool_parser: type[ToolParser] | None  # None: the output is not parsed for calls
    reasoning: ReasoningFormat | None  # None: no reasoning_content split
    constraint_after: str | None  # the constraint starts after this output text

    def decoder(self) -> ChoiceDecoder:
        """A fresh output decoder for one choice."""
        return ChoiceDecoder(self)


def plan_chat(state: Any, req: Any) -> ChatPlan:
    """The plan for ``req`` (a ``ChatRequest``) on the server ``state``."""
    tools = _tools(req)
    template = template_source(state)
    parser = _parser_class(state.args.tool_call_parser, template) if tools else None
    prompt = render_prompt(state, req, tools, template)
    grammar: dict[str, Any] = {}
    if tools and req.tool_choice != "none":
        if req.response_format is not None and req.response_format.type != "text":
            raise RequestValidationError("field 'response_format': cannot be combined with "
                                         "tools unless tool_choice is 'none'")
        try:
            spec = tool_call_grammar(tools, req.tool_choice or "auto", parser,
                                     req.parallel_tool_calls is not False)
        except ToolRequestError as exc:
            raise RequestValidationError(str(exc)) from None
        grammar = {"structural_tag": spec.value}  # canonical JSON text
    reasoning, after = _reasoning(state.args.reasoning_parser, prompt)
    return ChatPlan(prompt, grammar,
                    parser if tools and req.tool_choice != "none" else None,
                    reasoning if req.separate_reasoning else None, after)


def _tools(req: Any) -> list[dict[str, Any]] | None:
    if not req.tools:
        if req.tool_choice not in (None, "none"):
            raise RequestValidationError("field 'tool_choice': requires 'tools'")
        return None
    try:
        function_specs(req.tools)  # names and parameter schemas (tool_choice: in the grammar)
    except ToolRequestError as exc:
        raise RequestValidationError(str(exc)) from None
    return req.tools


def _parser_class(name: str | None, template: str | None) -> type[ToolParser]:
    return tool_parser_class(name) if name else detect_tool_parser(template)


def template_source(state: Any) -> str | None:
    """The chat template text in use: ``--chat-template`` (a file or the text), else the
    tokenizer's."""
    template = state.args.chat_template
    if template is not None:
        path = Path(template)
        return path.read_text() if path.is_file() else template
    own = getattr(state.tokenizer, "chat_template", None)
    if isinstance(own, dict):  # several named templates: the default one
        own = own.get("default") or next(iter(own.values()), None)
    return own if isinstance(own, str) else None


def template_supports_tools(template: str | None) -> bool:
    """Whether the template renders a ``tools`` variable (HF templates with a tool section)."""
    return template is not None and "tools" in template


def _message_dicts(req: Any) -> list[dict[str, Any]]:
    messages = []
    for m in req.messages:
        d = {k: v for k, v in m.model_dump(exclude_none=True).items() if k in MESSAGE_KEYS}
        content = m.content
        if isinstance(content, list):  # text parts only: this is a text model
            parts = []
            for part in content:
                if part.get("type") != "text":
                    raise RequestValidationError(
                        f"messages: content part of type {part.get('type')!r} is not "
                        f"supported (text only)")
                parts.append(part.get("text", ""))
            content = "".join(parts)
        d["content"] = content or ""
        messages.append(d)
    return messages


def _template_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant ``tool_calls`` with arguments as objects (what HF templates expect)."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = []
            for c in m["tool_calls"]:
                fn = dict(c.get("function") or {})
                try:
                    fn["arguments"] = json.loads(fn.get("arguments") or "{}")
                except (TypeError, json.JSONDecodeError):
                    pass  # leave what the client sent
                calls.append({**c, "function": fn})
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


def render_prompt(state: Any, req: Any, tools: list[dict[str, Any]] | None,
                  template: str | None) -> str:
    """The prompt text: the chat template over the messages (see the module docstring).
    Runs on the tokenizer manager's worker thread, off the event loop."""
    messages = _message_dicts(req)
    size = sum(len(m["content"]) for m in messages)
    if size > state.args.max_prompt_chars:  # template work grows with the text it is given
        raise RequestValidationError(
            f"messages: {size} characters of content; this server accepts at most "
            f"{state.args.max_prompt_chars} (--max-prompt-chars)")
    for i, m in enumerate(messages):
        if m.get("tool_calls") is not None and not isinstance(m["tool_calls"], list):
            raise RequestValidationError(f"field 'messages.{i}.tool_calls': expected a list")
    kwargs = _template_kwargs(state, req)
    client_template = "chat_template" in kwargs
    if template is None and not client_template:  # transformers' own error names no way out
        raise RequestValidationError(
            "messages: this model has no chat template (a base model): send a prompt to "
            "/v1/completions (response_format works there too), or start the server with "
            "--chat-template")
    if state.args.chat_template is not None and template is not None and not client_template:
        kwargs["chat_template"] = template
    if template_supports_tools(template):
        if tools:
            kwargs["tools"] = tools
        messages = _template_calls(messages)
    elif tools or any(m["role"] == "tool" or m.get("tool_calls") for m in messages):
        messages = generic_tool_messages(messages, tools or [])

    def render() -> str:
        return state.tokenizer.apply_chat_template(messages, tokenize=False,
                                                   add_generation_prompt=True, **kwargs)
    try:
        if client_template:
            return run_with_step_budget(render, CLIENT_TEMPLATE_MAX_STEPS)
        return render()
    except TemplateBudgetExceeded as exc:
        raise RequestValidationError(f"chat_template_kwargs.chat_template: {exc} (the limit "
                                     f"for a client-supplied template)") from None
    except Exception as exc:  # a template error is the request's problem, reported as such
        raise RequestValidationError(f"messages: chat template failed: {exc}") from None


def _template_kwargs(state: Any, req: Any) -> dict[str, Any]:
    """``chat_template_kwargs``, refused where they would override the server's own
    arguments or (unless ``--allow-client-chat-template``) supply a template."""
    kwargs = dict(req.chat_template_kwargs or {})
    reserved = sorted(set(kwargs) & set(RESERVED_TEMPLATE_KWARGS))
    if reserved:
        raise RequestValidationError(f"chat_template_kwargs: {reserved} are set by the "
                                     f"server and may not be given")
    if "chat_template" in kwargs and not state.args.allow_client_chat_template:
        raise RequestValidationError(
            "chat_template_kwargs.chat_template: this server does not accept client chat "
            "templates (the operator can allow them with --allow-client-chat-template)")
    if "chat_template" in kwargs and not isinstance(kwargs["chat_template"], str):
        raise RequestValidationError("chat_template_kwargs.chat_template: expected a string")
    return kwargs


def _reasoning(name: str | None, prompt: str) -> tuple[ReasoningFormat | None, str | None]:
    """The reasoning format for this prompt and the marker the constraint waits for."""
    if name is None:
        return None, None
    fmt = reasoning_format(name)
    tail = prompt.rstrip()
    if tail.endswith(fmt.end):  # the template closed the reasoning (thinking disabled)
        return None, None
    if tail.endswith(fmt.start):  # the template opened it: the output starts inside
        fmt = dataclasses.replace(fmt, starts_in_reasoning=True)
    return fmt, fmt.end


class ChoiceDecoder:
    """One choice's output -> reasoning, content and tool-call events (see the module
    docstring); :meth:`feed` per text delta, :meth:`finish` at the end."""

    def __init__(self, plan: ChatPlan) -> None:
        self.reasoning = ReasoningParser(plan.reasoning) if plan.reasoning else None
        self.tools = plan.tool_parser() if plan.tool_parser else None
        self.events: list[StreamEvent] = []  # everything emitted so far

    def feed(self, text: str) -> list[StreamEvent]:
        """Events for the next piece of output."""
        events = self.reasoning.feed(text) if self.reasoning else [ContentDelta(text)]
        return self._record(self._tool_events(events))

    def finish(self) -> list[StreamEvent]:
        """Events for text held back at the end."""
        events = self._tool_events(self.reasoning.finish() if self.reasoning else [])
        if self.tools is not None:
            events += self.tools.finish()
        return self._record(events)

    def _tool_events(self, events: list[StreamEvent]) -> list[StreamEvent]:
        if self.tools is None:
            return events
        out: list[StreamEvent] = []
        for e in events:
            out += self.tools.feed(e.text) if isinstance(e, ContentDelta) else [e]
        return out

    def _record(self, events: list[StreamEvent]) -> list[StreamEvent]:
        events = [e for e in events if not isinstance(e, ContentDelta | ReasoningDelta)
                  or e.text]
        self.events += events
        return events

    @property
    def has_calls(self) -> bool:
        return any(isinstance(e, ToolCallDelta) for e in self.events)


def whole_message(decoder: ChoiceDecoder, text: str) -> dict[str, Any]:
    """The ``message`` of a non-streamed choice."""
    decoder.feed(text)
    decoder.finish()
    events = decoder.events
    calls = merge_calls(events)
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    message: dict[str, Any] = {"role": "assistant",
                               "content": (content.strip() or None) if calls else content}
    if decoder.reasoning is not None:
        message["reasoning_content"] = "".join(
            e.text for e in events if isinstance(e, ReasoningDelta)) or None
    if calls:
        message["tool_calls"] = [{"id": c.id, "type": "function",
                                  "function": {"name": c.name, "arguments": c.arguments}}
                                 for c in calls]
    return message


def stream_delta(events: list[StreamEvent]) -> dict[str, Any]:
    """One streamed ``delta`` for ``events`` (content, reasoning_content, tool_calls as
    OpenAI streams them: the first piece of a call has id, type and name)."""
    delta: dict[str, Any] = {}
    content = "".join(e.text for e in events if isinstance(e, ContentDelta))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    if content:
        delta["content"] = content
    if reasoning:
        delta["reasoning_content"] = reasoning
    calls = []
    for e in events:
        if not isinstance(e, ToolCallDelta):
            continue
        if calls and calls[-1]["index"] == e.index and e.id is None:  # one piece per call
            calls[-1]["function"]["arguments"] += e.arguments
            continue
        piece: dict[str, Any] = {"index": e.index, "function": {"arguments": e.arguments}}
        if e.id is not None:
            piece.update(id=e.id, type="function")
            piece["function"]["name"] = e.name
        calls.append(piece)
    if calls:
        delta["tool_calls"] = calls
    return delta


def chat_finish_reason(reason: str | None, decoder: ChoiceDecoder) -> str | None:
    """OpenAI's ``tool_calls`` when an output that stopped normally made calls."""
    return "tool_calls" if reason == "stop" and decoder.has_calls else reason
