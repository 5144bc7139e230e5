"""Reasoning output: ``<think>...</think>`` text goes to ``reasoning_content``, the rest to
``content`` (SGLang's ``--reasoning-parser``).

Families differ only in whether the output starts inside the reasoning: DeepSeek-R1-style
templates put ``<think>`` in the prompt, so the output begins with reasoning text and only
the end marker appears (``starts_in_reasoning``); Qwen3-style models write both markers. With
``starts_in_reasoning`` False, an output that does not open with the start marker (after
white space) is all content. Markers split across deltas are held back until decided.
"""

from __future__ import annotations

from dataclasses import dataclass

from .events import ContentDelta, ReasoningDelta, StreamEvent, held_back


@dataclass(frozen=True)
class ReasoningFormat:
    """Markers of one family."""

    start: str = "<think>"
    end: str = "</think>"
    starts_in_reasoning: bool = False

    def __post_init__(self) -> None:
        if not self.start or not self.end:
            raise ValueError("reasoning markers must be non-empty strings")


REASONING_FORMATS = {
    "qwen3": ReasoningFormat(),
    "deepseek-r1": ReasoningFormat(starts_in_reasoning=True),
    "think": ReasoningFormat(),
}


def reasoning_format(name: str) -> ReasoningFormat:
    """The format registered as ``name`` (server flag ``--reasoning-parser``)."""
    try:
        return REASONING_FORMATS[name]
    except KeyError:
        raise ValueError(f"unknown reasoning parser {name!r}; choose one of "
                         f"{sorted(REASONING_FORMATS)}") from None


class ReasoningParser:
    """Splits one output into reasoning and content, streaming or whole."""

    def __init__(self, fmt: ReasoningFormat | None = None) -> None:
        self.fmt = fmt or ReasoningFormat()
        self.state = "reasoning" if self.fmt.starts_in_reasoning else "start"
        self.buffer = ""

    def feed(self, text: str) -> list[StreamEvent]:
        """Events for the next piece of output."""
        events: list[StreamEvent] = []
        self.buffer += text
        while self.buffer:
            if self.state == "content":
                events.append(ContentDelta(self.buffer))
                self.buffer = ""
            elif self.state == "after":  # white space after the end marker is dropped
                self.buffer = self.buffer.lstrip()
                if self.buffer:
                    self.state = "content"
            elif self.state == "start":
                stripped = self.buffer.lstrip()
                if stripped.startswith(self.fmt.start):
                    self.buffer, self.state = stripped[len(self.fmt.start):], "reasoning"
                elif self.fmt.start.startswith(stripped):
                    break  # maybe the start marker: wait
                else:
                    self.state = "content"
            else:  # reasoning
                at = self.buffer.find(self.fmt.end)
                if at >= 0:
                    if at:
                        events.append(ReasoningDelta(self.buffer[:at]))
                    self.buffer, self.state = self.buffer[at + len(self.fmt.end):], "after"
                    continue
                keep = held_back(self.buffer, self.fmt.end)
                if len(self.buffer) > keep:
                    events.append(ReasoningDelta(self.buffer[:len(self.buffer) - keep]))
                self.buffer = self.buffer[len(self.buffer) - keep:]
                break
        return events

    def finish(self) -> list[StreamEvent]:
        """Held-back text at the end (an unclosed reasoning stays reasoning)."""
        rest, self.buffer = self.buffer, ""
        if not rest or self.state == "after":
            return []
        return [ReasoningDelta(rest) if self.state == "reasoning" else ContentDelta(rest)]

    def parse(self, text: str) -> tuple[str, str]:
        """(reasoning, content) of a whole output (a fresh parser per output)."""
        events = self.feed(text) + self.finish()
        reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
        content = "".join(e.text for e in events if isinstance(e, ContentDelta))
        return reasoning, content
