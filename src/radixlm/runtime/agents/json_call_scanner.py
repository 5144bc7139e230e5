"""Incremental scan of one JSON tool-call object ``{"name": ..., "arguments": {...}}``.

Fed text piece by piece, it finds where the object ends (bracket depth, outside strings),
and, when the object starts with the name (as every supported model family and our forced
grammar write it), the name as soon as it is complete and the arguments text as it arrives,
so a server can stream ``tool_calls`` deltas. Objects in another key order are reported
whole when they end.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

_HEADER = re.compile(r'\s*\{\s*"name"\s*:\s*"((?:[^"\\]|\\.)*)"\s*,\s*"(?:arguments|parameters)"'
                     r'\s*:\s*(?=[{\[])')
ARGUMENT_KEYS = ("arguments", "parameters")


class _Depth:
    """Bracket depth of JSON text outside strings."""

    __slots__ = ("depth", "in_string", "escape", "started")

    def __init__(self) -> None:
        self.depth, self.in_string, self.escape, self.started = 0, False, False, False

    def feed(self, text: str) -> int:
        """Characters of ``text`` consumed up to and including the value's end (-1: not
        ended yet)."""
        for i, c in enumerate(text):
            if self.in_string:
                if self.escape:
                    self.escape = False
                elif c == "\\":
                    self.escape = True
                elif c == '"':
                    self.in_string = False
            elif c == '"':
                self.in_string = True
            elif c in "{[":
                self.depth += 1
                self.started = True
            elif c in "}]":
                self.depth -= 1
                if self.started and self.depth == 0:
                    return i + 1
        return -1


@dataclass(frozen=True)
class ScanResult:
    """What one feed found: a new ``name`` (once), ``arguments`` text, and whether the
    object ended (``rest``: the text after it)."""

    name: str | None = None
    arguments: str = ""
    done: bool = False
    rest: str = ""


class JsonCallScanner:
    """Scans one call object; see the module docstring."""

    def __init__(self) -> None:
        self.text = ""
        self._outer = _Depth()
        self._args = _Depth()
        self._args_from: int | None = None  # offset of the arguments value in self.text
        self._args_done = False
        self._args_text = ""  # the arguments value's text as the model wrote it
        self.header_sent = False

    def feed(self, piece: str) -> ScanResult:
        """Consume ``piece``; text past the object's end is returned in ``rest``."""
        end = self._outer.feed(piece)
        used = piece if end < 0 else piece[:end]
        start = len(self.text)
        self.text += used
        name = None
        if not self.header_sent:
            m = _HEADER.match(self.text)
            if m:
                name, self.header_sent, self._args_from = _unescape(m.group(1)), True, m.end()
                start = m.end()
        arguments = ""
        if self._args_from is not None and not self._args_done:
            chunk = self.text[max(start, self._args_from):]
            stop = self._args.feed(chunk)
            if stop >= 0:
                chunk, self._args_done = chunk[:stop], True
            arguments = chunk
            self._args_text += chunk
        return ScanResult(name, arguments, end >= 0, piece[len(used):] if end >= 0 else "")

    def parsed(self) -> tuple[str, str] | None:
        """(name, arguments JSON text) of the complete object, or None if it is not a call."""
        try:
            value = json.loads(self.text)
        except json.JSONDecodeError:
            return None
        if not isinstance(value, dict) or not isinstance(value.get("name"), str):
            return None
        if self._args_done:  # the same text the stream sent
            return value["name"], self._args_text
        args = next((value[k] for k in ARGUMENT_KEYS if k in value), {})
        if isinstance(args, str):  # some models write the arguments as a JSON string
            return value["name"], args
        return value["name"], json.dumps(args, ensure_ascii=False)


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except json.JSONDecodeError:
        return s
