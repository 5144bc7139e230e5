"""Find a JSON spelling of a value that a grammar's automaton accepts (for tests and benchmarks).

Grammars fix the property order and accept a subset of number spellings, so "the grammar
accepts this instance" means: *some* serialisation of the value (any key order, any of the
usual number spellings, compact or ``", "``/``": "`` separators) is accepted. The search walks
the byte DFA and keeps, per (state, keys still to write), one witness text; it is exhaustive
unless the frontier passes ``max_frontier`` (then ``truncated`` is set).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .lazy_dfa import DEAD, LazyDFA


@dataclass
class WitnessResult:
    """``text`` is an accepted spelling (None if none found); ``truncated``: search was cut."""

    text: str | None
    truncated: bool


def _number_spellings(value: int | float) -> list[str]:
    """Spellings that parse back to the same Python value *and type* (draft 4 tells 1 from
    1.0): ints as digits, floats with their repr and in plain decimal notation."""
    if not isinstance(value, float):
        return [json.dumps(value)]
    out = [json.dumps(value)]
    plain = format(value, "f") if abs(value) >= 1e-6 else format(value, ".30f")
    if "." in plain:
        plain = plain.rstrip("0")
        plain = plain + "0" if plain.endswith(".") else plain
        out.append(plain)
    return list(dict.fromkeys(out))


class _Search:
    def __init__(self, dfa: LazyDFA, comma: str, colon: str, max_frontier: int) -> None:
        self.dfa = dfa
        self.comma = comma
        self.colon = colon
        self.max_frontier = max_frontier
        self.truncated = False

    def walk(self, state: int, text: str) -> int:
        return self.dfa.walk(state, text.encode("utf-8"))

    def _cap(self, frontier: dict) -> dict:
        if len(frontier) > self.max_frontier:
            self.truncated = True
            return dict(list(frontier.items())[: self.max_frontier])
        return frontier

    def value(self, state: int, value: Any) -> dict[int, str]:
        """End states reachable by spelling ``value`` from ``state``, with a witness each."""
        if isinstance(value, dict):
            return self.obj(state, value)
        if isinstance(value, list):
            return self.arr(state, value)
        if isinstance(value, bool) or value is None:
            spellings = [json.dumps(value)]
        elif isinstance(value, (int, float)):
            spellings = _number_spellings(value)
        else:
            spellings = [json.dumps(value, ensure_ascii=False)]
        out: dict[int, str] = {}
        for text in spellings:
            end = self.walk(state, text)
            if end != DEAD:
                out.setdefault(end, text)
        return out

    def arr(self, state: int, items: list) -> dict[int, str]:
        frontier = {self.walk(state, "["): "["}
        for i, item in enumerate(items):
            nxt: dict[int, str] = {}
            for s, text in frontier.items():
                if s == DEAD:
                    continue
                s1 = self.walk(s, self.comma) if i else s
                if s1 == DEAD:
                    continue
                for end, t in self.value(s1, item).items():
                    nxt.setdefault(end, text + (self.comma if i else "") + t)
            frontier = self._cap(nxt)
        return self._close(frontier, "]")

    def obj(self, state: int, obj: dict) -> dict[int, str]:
        keys = list(obj)
        heads = [(k, json.dumps(k, ensure_ascii=False) + self.colon) for k in keys]
        frontier: dict[tuple[int, frozenset], str] = {(self.walk(state, "{"), frozenset()): "{"}
        for i in range(len(keys)):
            nxt: dict[tuple[int, frozenset], str] = {}
            for (s, used), text in frontier.items():
                if s == DEAD:
                    continue
                s0 = self.walk(s, self.comma) if i else s
                if s0 == DEAD:
                    continue
                for k, head in heads:  # instance order first: it is the likeliest
                    if k in used:
                        continue
                    s1 = self.walk(s0, head)
                    if s1 == DEAD:
                        continue
                    for end, t in self.value(s1, obj[k]).items():
                        nxt.setdefault((end, used | {k}),
                                       text + (self.comma if i else "") + head + t)
            frontier = self._cap(nxt)
        return self._close({s: t for (s, _), t in frontier.items()}, "}")

    def _close(self, frontier: dict[int, str], close: str) -> dict[int, str]:
        out: dict[int, str] = {}
        for s, text in frontier.items():
            end = self.walk(s, close) if s != DEAD else DEAD
            if end != DEAD:
                out.setdefault(end, text + close)
        return out


def find_accepted_text(dfa: LazyDFA, value: Any, spaced: bool = False,
                       max_frontier: int = 256) -> WitnessResult:
    """An accepted spelling of ``value`` (compact separators, or ``", "``/``": "``)."""
    search = _Search(dfa, ", " if spaced else ",", ": " if spaced else ":", max_frontier)
    for end, text in search.value(dfa.initial, value).items():
        if dfa.accepting[end]:
            return WitnessResult(text, search.truncated)
    return WitnessResult(None, search.truncated)
