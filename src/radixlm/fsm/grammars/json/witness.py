"""Find a JSON spelling of a value that a grammar's automaton accepts (for tests and benchmarks).

Grammars fix the property order and accept a subset of number spellings, so "the grammar
accepts this instance" means: *some* serialisation of the value (any key order, the value's
number spellings, compact or ``", "``/``": "`` separators) is accepted. The instance's own key
order is tried first; then a depth-first search over key orders (most promising key first,
failed (state, keys left) pairs remembered) with a per-object expansion budget; when the
budget runs out the result says ``truncated`` (undecided rather than rejected).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from functools import lru_cache
from typing import Any

from ...automaton.lazy_dfa import DEAD, LazyDFA


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
    if value != value or value in (float("inf"), float("-inf")):
        return out
    plain = format(Decimal(repr(value)), "f")  # the shortest repr, without an exponent
    if "." in plain:
        plain = plain.rstrip("0")
        out.append(plain + "0" if plain.endswith(".") else plain)
    return list(dict.fromkeys(out))


@lru_cache(maxsize=65536)
def _scalar_spellings(kind: type, value: Any) -> tuple[str, ...]:
    if kind in (int, float):
        return tuple(_number_spellings(value))
    return (json.dumps(value, ensure_ascii=False),)


class _Search:
    def __init__(self, dfa: LazyDFA, comma: str, colon: str, budget: int,
                 reorder: bool) -> None:
        self.dfa = dfa
        self.comma = comma
        self.colon = colon
        self.budget = budget
        self.reorder = reorder
        self.truncated = False
        self._memo: dict[tuple[int, int], dict[int, str]] = {}
        self._keep: list[Any] = []  # values whose ids key the memo

    def walk(self, state: int, text: str) -> int:
        return self.dfa.walk(state, text.encode("utf-8"))

    def value(self, state: int, value: Any) -> dict[int, str]:
        """End states reachable by spelling ``value`` from ``state``, with a witness each."""
        if isinstance(value, (dict, list)):
            key = (state, id(value))
            hit = self._memo.get(key)
            if hit is None:
                hit = self.obj(state, value) if isinstance(value, dict) else \
                    self.arr(state, value)
                self._memo[key] = hit
                self._keep.append(value)
            return hit
        out: dict[int, str] = {}
        for text in _scalar_spellings(type(value), value):
            end = self.walk(state, text)
            if end != DEAD:
                out.setdefault(end, text)
        return out

    def arr(self, state: int, items: list) -> dict[int, str]:
        frontier = {self.walk(state, "["): "["}
        for i, item in enumerate(items):
            nxt: dict[int, str] = {}
            for s, text in frontier.items():
                s1 = self.walk(s, self.comma) if i and s != DEAD else s
                if s1 == DEAD:
                    continue
                for end, t in self.value(s1, item).items():
                    nxt.setdefault(end, text + (self.comma if i else "") + t)
            frontier = nxt
        return self._close(frontier, "]")

    def obj(self, state: int, obj: dict) -> dict[int, str]:
        """Spell an object: instance key order, or (``reorder``) searched orders. Up to
        :data:`_MAX_ENDS` end states that different orders reach are returned (what follows
        may accept only some: an array item that must also match a ``contains`` schema,
        whose members come in that schema's order). The budget cuts the search short
        (``truncated``) only while no order has been found."""
        heads = {k: json.dumps(k, ensure_ascii=False) + self.colon for k in obj}
        seen: set[tuple[int, frozenset]] = set()
        budget = [self.budget]
        found: dict[int, str] = {}

        def dfs(s: int, remaining: tuple[str, ...], first: bool, text: str) -> None:
            if len(found) >= _MAX_ENDS:
                return
            if not remaining:
                end = self.walk(s, "}")
                if end != DEAD:
                    found.setdefault(end, text + "}")
                return
            key = (s, frozenset(remaining))
            if key in seen:  # its completions are the same whatever came before
                return
            seen.add(key)
            budget[0] -= 1
            if budget[0] < 0:
                self.truncated = self.truncated or not found
                return
            s0 = s if first else self.walk(s, self.comma)
            options = []
            candidates = remaining if self.reorder else remaining[:1]
            for k in candidates if s0 != DEAD else ():
                s1 = self.walk(s0, heads[k])
                for end, t in (self.value(s1, obj[k]) if s1 != DEAD else {}).items():
                    # most promising first: keeps the most remaining keys writable at once
                    score = sum(1 for j in remaining
                                if j != k and self.walk(end, self.comma + heads[j]) != DEAD)
                    options.append((-score, len(options), k, end, t))
            for _, _, k, end, t in sorted(options):
                dfs(end, tuple(j for j in remaining if j != k), False,
                    text + ("" if first else self.comma) + heads[k] + t)

        start = self.walk(state, "{")
        if start != DEAD:
            dfs(start, tuple(obj), True, "{")
        return found

    def _close(self, frontier: dict[int, str], close: str) -> dict[int, str]:
        out: dict[int, str] = {}
        for s, text in frontier.items():
            end = self.walk(s, close) if s != DEAD else DEAD
            if end != DEAD:
                out.setdefault(end, text + close)
        return out


_MAX_ENDS = 4  # end states one object's spellings report, at most


def find_accepted_text(dfa: LazyDFA, value: Any, spaced: bool = False,
                       budget: int = 1024) -> WitnessResult:
    """An accepted spelling of ``value`` (compact separators, or ``", "``/``": "``);
    ``budget``: object-search expansions allowed per object."""
    comma, colon = (", ", ": ") if spaced else (",", ":")
    truncated = False
    for reorder in (False, True):
        search = _Search(dfa, comma, colon, budget, reorder)
        for end, text in search.value(dfa.initial, value).items():
            if dfa.accepting[end]:
                return WitnessResult(text, search.truncated)
        truncated = search.truncated
    return WitnessResult(None, truncated)
