"""What the streaming parsers emit: typed deltas (never dicts)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContentDelta:
    """Answer text."""

    text: str


@dataclass(frozen=True)
class ReasoningDelta:
    """Reasoning text (between the think markers)."""

    text: str


@dataclass(frozen=True)
class ToolCallDelta:
    """A piece of tool call ``index``, as OpenAI streams it: the first piece has ``id`` and
    ``name`` (and ``arguments`` ""), later ones only more ``arguments`` text."""

    index: int
    arguments: str
    id: str | None = None
    name: str | None = None


@dataclass(frozen=True)
class ToolCall:
    """A complete call; ``arguments`` is JSON text (an object)."""

    id: str
    name: str
    arguments: str


StreamEvent = ContentDelta | ReasoningDelta | ToolCallDelta


def held_back(buffer: str, marker: str) -> int:
    """Length of the longest suffix of ``buffer`` that is a proper prefix of ``marker`` (text
    that must wait: the next delta may complete the marker)."""
    for n in range(min(len(buffer), len(marker) - 1), 0, -1):
        if buffer.endswith(marker[:n]):
            return n
    return 0


def merge_calls(events: list[StreamEvent]) -> list[ToolCall]:
    """Reassemble streamed tool-call deltas into calls (what an OpenAI client does)."""
    calls: dict[int, list[str]] = {}
    for e in events:
        if isinstance(e, ToolCallDelta):
            entry = calls.setdefault(e.index, ["", "", ""])
            if e.id is not None:
                entry[0] = e.id
            if e.name is not None:
                entry[1] += e.name
            entry[2] += e.arguments
    return [ToolCall(*calls[i]) for i in sorted(calls)]


def join_text(events: list[StreamEvent], kind: type) -> str:
    """The concatenated text of the events of ``kind`` (ContentDelta or ReasoningDelta)."""
    return "".join(e.text for e in events if isinstance(e, kind))
