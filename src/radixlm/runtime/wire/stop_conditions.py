"""Text stop conditions: stop strings and stop regexes, found in decoded output text.

The scheduler ends a request when :func:`find_stop` finds one in the output so far; the
detokenizer trims the text at the same place and, while streaming, holds back the tail that
could still become a stop (:func:`holdback_start`), so streamed text never shows part of one.
Regexes use Python ``re`` semantics (as SGLang's ``stop_regex``); partial matches for the
hold-back come from the ``regex`` module, which can tell "this suffix may still match";
imported on the first stop regex (~3 MiB of RSS in the detokenizer, where most servings
never use one: issue 40).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import regex


@dataclass(frozen=True)
class StopMatch:
    """Where the output must be cut (``start``) and what matched (the stop string or the
    regex pattern, as SGLang reports it in ``finish_reason.matched``)."""

    start: int
    matched: str


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


@lru_cache(maxsize=256)
def _compiled_partial(pattern: str) -> regex.Pattern[str] | None:
    import regex

    try:
        return regex.compile(pattern)
    except regex.error:  # a dialect difference: no hold-back for this pattern
        return None


def find_stop(text: str, stop_strs: list[str], stop_regexes: list[str]) -> StopMatch | None:
    """The earliest stop in ``text`` (ties: stop strings first, then in the given order)."""
    best: StopMatch | None = None
    for s in stop_strs:
        at = text.find(s)
        if at >= 0 and (best is None or at < best.start):
            best = StopMatch(at, s)
    for pattern in stop_regexes:
        m = _compiled(pattern).search(text)
        if m is not None and (best is None or m.start() < best.start):
            best = StopMatch(m.start(), pattern)
    return best


def holdback_start(text: str, stop_strs: list[str], stop_regexes: list[str]) -> int:
    """The first index of the tail of ``text`` that may be the start of a stop not yet
    complete (``len(text)`` when nothing needs holding back)."""
    start = len(text)
    for s in stop_strs:
        for k in range(min(len(s) - 1, len(text)), 0, -1):
            if text.endswith(s[:k]):
                start = min(start, len(text) - k)
                break
    for pattern in stop_regexes:
        compiled = _compiled_partial(pattern)
        m = compiled.search(text, partial=True) if compiled is not None else None
        if m is not None and m.partial:
            start = min(start, m.start())
    return start


def stop_str_window(stop_strs: list[str]) -> int:
    """Tokens of output tail that must be decoded to see any stop string (each token is at
    least one character, plus one for a token that straddles the boundary)."""
    return max((len(s) for s in stop_strs), default=0) + 1
