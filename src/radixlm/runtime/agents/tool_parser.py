"""Tool-call parsers per model family: model text -> content and OpenAI-style tool calls.

Each parser is a small streaming state machine (:meth:`ToolParser.feed` per detokenized
delta, :meth:`ToolParser.finish` at the end); the non-streaming :meth:`ToolParser.parse` is
the same machine fed once, so both paths agree by construction. Text that might be the
start of a call marker is held back until the next delta decides it. A call whose JSON is
invalid before its name was streamed is given back as content (what the model wrote).
Each parser also knows its call syntax (:meth:`ToolParser.call_begin` / ``call_end`` /
``trigger``), which the grammar for forced and ``auto`` tool calls uses.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from .events import ContentDelta, StreamEvent, ToolCall, ToolCallDelta, held_back, merge_calls
from .json_call_scanner import JsonCallScanner


def random_call_id() -> str:
    """An OpenAI-style call id."""
    return f"call_{uuid.uuid4().hex[:24]}"


@dataclass(frozen=True)
class ParsedOutput:
    """A finished output: answer text (calls removed) and the calls in order."""

    content: str
    calls: list[ToolCall]


class ToolParser:
    """Base: the call state shared by every family (see the module docstring)."""

    name: ClassVar[str] = ""
    trigger: ClassVar[str] = ""  # the text that opens a call (structural-tag trigger)
    arguments_key: ClassVar[str] = "arguments"

    def __init__(self, make_id: Callable[[], str] = random_call_id) -> None:
        self.make_id = make_id
        self.index = 0  # calls seen so far
        self.scanner: JsonCallScanner | None = None
        self._raw = ""  # the current call's text as written (given back if it is invalid)

    @classmethod
    def call_begin(cls, function: str) -> str:
        """Text before a call's arguments object."""
        raise NotImplementedError

    @classmethod
    def call_end(cls) -> str:
        """Text after a call's arguments object."""
        raise NotImplementedError

    @classmethod
    def call_separator(cls) -> str:
        """Text between parallel calls."""
        return ""

    def feed(self, text: str) -> list[StreamEvent]:
        """Events for the next piece of model output."""
        raise NotImplementedError

    def finish(self) -> list[StreamEvent]:
        """Events for text still held back when the output ends."""
        raise NotImplementedError

    def parse(self, text: str) -> ParsedOutput:
        """Parse a whole output (a fresh parser per output)."""
        events = self.feed(text) + self.finish()
        content = "".join(e.text for e in events if isinstance(e, ContentDelta))
        return ParsedOutput(content.strip() if self.index else content, merge_calls(events))

    # -- shared call handling ---------------------------------------------------------------

    def _start_call(self, opening: str) -> None:
        self.scanner, self._raw = JsonCallScanner(), opening

    def _feed_call(self, text: str) -> tuple[list[StreamEvent], str | None]:
        """Feed the open call; (events, text after the call or None while it is open)."""
        assert self.scanner is not None
        scan = self.scanner.feed(text)
        self._raw += text[:len(text) - len(scan.rest)] if scan.done else text
        events: list[StreamEvent] = []
        if scan.name is not None:
            events.append(ToolCallDelta(self.index, "", self.make_id(), scan.name))
        if scan.arguments:
            events.append(ToolCallDelta(self.index, scan.arguments))
        if not scan.done:
            return events, None
        parsed = self.scanner.parsed()
        if self.scanner.header_sent:
            self.index += 1
        elif parsed is not None:  # another key order: the whole call at once
            events.append(ToolCallDelta(self.index, parsed[1], self.make_id(), parsed[0]))
            self.index += 1
        else:
            events.append(ContentDelta(self._raw))  # not a call after all
        self.scanner = None
        return events, scan.rest

    def _unfinished_call(self) -> list[StreamEvent]:
        """At the end inside a call: give the text back unless its name was streamed."""
        scanner, self.scanner = self.scanner, None
        if scanner is None or scanner.header_sent:
            if scanner is not None:
                self.index += 1
            return []
        return [ContentDelta(self._raw)]


class HermesToolParser(ToolParser):
    """Hermes / Qwen: ``<tool_call>\\n{"name": ..., "arguments": {...}}\\n</tool_call>``,
    any number of calls, text around them."""

    name = "hermes"
    trigger = "<tool_call>"
    close = "</tool_call>"

    def __init__(self, make_id: Callable[[], str] = random_call_id) -> None:
        super().__init__(make_id)
        self.buffer = ""
        self.after_call = False  # between a call object's end and its close marker

    @classmethod
    def call_begin(cls, function: str) -> str:
        return f'<tool_call>\n{{"name": "{function}", "arguments": '

    @classmethod
    def call_end(cls) -> str:
        return "}\n</tool_call>"

    @classmethod
    def call_separator(cls) -> str:
        return "\n"

    def feed(self, text: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self.buffer += text
        while self.buffer:
            if self.scanner is not None:
                more, rest = self._feed_call(self.buffer)
                events += more
                self.buffer = rest if rest is not None else ""
                self.after_call = rest is not None
                continue
            if self.after_call:
                stripped = self.buffer.lstrip()
                if stripped.startswith(self.close):
                    self.buffer, self.after_call = stripped[len(self.close):], False
                    continue
                if self.close.startswith(stripped):
                    break  # maybe the close marker: wait
                self.after_call = False  # no close marker: carry on as text
            at = self.buffer.find(self.trigger)
            if at >= 0:
                if at:
                    events.append(ContentDelta(self.buffer[:at]))
                self._start_call(self.trigger)
                self.buffer = self.buffer[at + len(self.trigger):]
                continue
            keep = held_back(self.buffer, self.trigger)
            if len(self.buffer) > keep:
                events.append(ContentDelta(self.buffer[:len(self.buffer) - keep]))
            self.buffer = self.buffer[len(self.buffer) - keep:]
            break
        return events

    def finish(self) -> list[StreamEvent]:
        events = self._unfinished_call()
        if self.buffer and not self.after_call:
            events.append(ContentDelta(self.buffer))
        self.buffer = ""
        return events


class Llama3JsonToolParser(ToolParser):
    """Llama 3.x JSON calls: the output is ``{"name": ..., "parameters": {...}}`` (optionally
    after ``<|python_tag|>``; several calls separated by ``;``), otherwise it is text."""

    name = "llama3"
    trigger = "<|python_tag|>"
    arguments_key = "parameters"

    def __init__(self, make_id: Callable[[], str] = random_call_id) -> None:
        super().__init__(make_id)
        self.buffer = ""
        self.mode = "start"  # start -> calls | text

    @classmethod
    def call_begin(cls, function: str) -> str:
        return f'{{"name": "{function}", "parameters": '

    @classmethod
    def call_end(cls) -> str:
        return "}"

    @classmethod
    def call_separator(cls) -> str:
        return "; "

    def feed(self, text: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        self.buffer += text
        while self.buffer:
            if self.mode == "text":
                events.append(ContentDelta(self.buffer))
                self.buffer = ""
            elif self.scanner is not None:
                more, rest = self._feed_call(self.buffer)
                events += more
                self.buffer = rest if rest is not None else ""
            else:
                stripped = self.buffer.lstrip().lstrip(";").lstrip()
                if not stripped:
                    break
                if stripped.startswith(self.trigger):
                    self.buffer, self.mode = stripped[len(self.trigger):], "calls"
                elif self.trigger.startswith(stripped):
                    break  # maybe the tag: wait
                elif stripped.startswith("{"):
                    self._start_call("")
                    self.buffer, self.mode = stripped, "calls"
                else:
                    self.mode = "text"
        return events

    def finish(self) -> list[StreamEvent]:
        events = self._unfinished_call()
        if self.buffer and self.mode != "calls":
            events.append(ContentDelta(self.buffer))
        self.buffer = ""
        return events


TOOL_PARSERS: dict[str, type[ToolParser]] = {
    "hermes": HermesToolParser, "qwen": HermesToolParser, "qwen25": HermesToolParser,
    "llama3": Llama3JsonToolParser,
}


def tool_parser_class(name: str) -> type[ToolParser]:
    """The parser registered as ``name`` (server flag ``--tool-call-parser``)."""
    try:
        return TOOL_PARSERS[name]
    except KeyError:
        raise ValueError(f"unknown tool-call parser {name!r}; choose one of "
                         f"{sorted(TOOL_PARSERS)}") from None


def detect_tool_parser(chat_template: str | None) -> type[ToolParser]:
    """A parser for a chat template: Llama-3 JSON where the template says so (its
    ``<|python_tag|>`` or ``"parameters"`` call format), Hermes otherwise (Qwen, Hermes
    and the generic rendering all use ``<tool_call>``)."""
    template = chat_template or ""
    if "<|python_tag|>" in template or ("<|eom_id|>" in template and "parameters" in template):
        return Llama3JsonToolParser
    return HermesToolParser
