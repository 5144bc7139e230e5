"""Whitespace policy between JSON tokens (bounded in every mode: no runaway newlines)."""

from __future__ import annotations

from dataclasses import dataclass

from ..regex import tree as ra

MODES = ("compact", "single", "flexible")


@dataclass(frozen=True)
class WhitespacePolicy:
    """Which whitespace may appear between JSON tokens.

    ``compact``: none. ``single`` (default, like outlines' ``[ ]?``): at most one space.
    ``flexible``: up to ``max_chars`` of space, tab, CR and LF (for indented output).
    """

    mode: str = "single"
    max_chars: int = 16

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"whitespace mode must be one of {MODES}, got {self.mode!r}")
        if not 1 <= self.max_chars <= 256:
            raise ValueError(f"whitespace max_chars must be in [1, 256], got {self.max_chars}")

    def node(self) -> ra.Node:
        """The regex of one gap between tokens."""
        if self.mode == "compact":
            return ra.EPSILON
        if self.mode == "single":
            return ra.opt(ra.lit(" "))
        return ra.repeat(ra.char_set(" \t\r\n"), 0, self.max_chars)
