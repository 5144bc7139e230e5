"""Structural tags: free text until a trigger, then a constrained body, then free text again.

The request format is SGLang's ``response_format``::

    {"type": "structural_tag",
     "structures": [{"begin": "<tool_call>{\\"name\\": \\"f\\", \\"arguments\\": ",
                     "schema": {...}, "end": "}</tool_call>"}],
     "triggers": ["<tool_call>"]}

Every ``begin`` starts with one of the ``triggers``. The output is text in which no trigger
occurs, except where a structure starts: the moment a trigger has been generated, the rest of
one structure's ``begin`` (whose begin starts with that trigger), a JSON value valid for its
``schema`` and its ``end`` must follow; then free text again, any number of times. As a
language this is regular and exact::

    ( F(t) rest(t) body end )*  G

where ``F(t)`` is "text whose first trigger occurrence ends at its end, and that trigger is
``t``" and ``G`` is "text with no trigger". Both are built with the derivative engine's
intersection and complement (:class:`..regex.tree.Constrained`): ``F(t) = (.* t) minus
(.* T .+)`` with ``T`` any trigger. ``stop_after_first`` (xgrammar's option, an extension
here) ends the output after the first structure (one tool call).

Printing such a grammar as regex text (:func:`..regex.tree.render`) is not exact: the
lookaheads it uses cannot be scoped to one segment. The automaton is exact; nothing in the
runtime uses the printed form.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import GrammarError
from ..regex import tree as ra

ANY = ra.chars([(0, ra.MAX_CODE_POINT)])


@dataclass(frozen=True)
class TagStructure:
    """One constrained region: ``begin`` text, a JSON value for ``schema``, ``end`` text."""

    begin: str
    schema: Any
    end: str

    def __post_init__(self) -> None:
        if not isinstance(self.begin, str) or not self.begin:
            raise GrammarError(f"structural_tag: a structure's 'begin' must be a non-empty "
                               f"string, got {self.begin!r}")
        if not isinstance(self.end, str):
            raise GrammarError(f"structural_tag: a structure's 'end' must be a string, got "
                               f"{self.end!r}")
        if not isinstance(self.schema, (dict, bool)):
            raise GrammarError(f"structural_tag: a structure's 'schema' must be a JSON Schema "
                               f"object, got {type(self.schema).__name__}")


@dataclass(frozen=True)
class StructuralTag:
    """Validated structures and triggers (see the module docstring)."""

    structures: tuple[TagStructure, ...]
    triggers: tuple[str, ...]
    stop_after_first: bool = False
    at_least_one: bool = False

    def __post_init__(self) -> None:
        if not self.structures:
            raise GrammarError("structural_tag: 'structures' must list at least one structure")
        if not self.triggers or not all(isinstance(t, str) and t for t in self.triggers):
            raise GrammarError(f"structural_tag: 'triggers' must be a non-empty list of "
                               f"non-empty strings, got {list(self.triggers)!r}")
        for s in self.structures:
            if not any(s.begin.startswith(t) for t in self.triggers):
                raise GrammarError(f"structural_tag: structure begin {s.begin!r} starts with "
                                   f"none of the triggers {list(self.triggers)!r}")

    @classmethod
    def from_value(cls, value: Any) -> StructuralTag:
        """From the request's object (or its JSON text); ``type`` may be present."""
        if isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise GrammarError(f"structural_tag: not valid JSON ({exc})") from None
        if not isinstance(value, dict):
            raise GrammarError(f"structural_tag: expected an object with 'structures' and "
                               f"'triggers', got {type(value).__name__}")
        unknown = set(value) - {"type", "structures", "triggers", *_FLAGS}
        if unknown:
            raise GrammarError(f"structural_tag: unknown fields {sorted(unknown)} (expected "
                               f"'structures', 'triggers', optional {list(_FLAGS)})")
        if value.get("type", "structural_tag") != "structural_tag":
            raise GrammarError(f"structural_tag: 'type' must be 'structural_tag', got "
                               f"{value.get('type')!r}")
        raw = value.get("structures")
        if not isinstance(raw, list):
            raise GrammarError("structural_tag: 'structures' must be a list")
        structures = tuple(_structure(s) for s in raw)
        triggers = value.get("triggers")
        if not isinstance(triggers, list):
            raise GrammarError("structural_tag: 'triggers' must be a list of strings")
        flags = [value.get(name, False) for name in _FLAGS]
        for name, flag in zip(_FLAGS, flags, strict=True):
            if not isinstance(flag, bool):
                raise GrammarError(f"structural_tag: {name!r} must be a boolean, got {flag!r}")
        return cls(structures, tuple(triggers), *flags)

    def canonical(self) -> str:
        """Stable JSON text (cache keys)."""
        return json.dumps({"structures": [{"begin": s.begin, "schema": s.schema, "end": s.end}
                                          for s in self.structures],
                           "triggers": list(self.triggers),
                           "stop_after_first": self.stop_after_first,
                           "at_least_one": self.at_least_one},
                          sort_keys=True, separators=(",", ":"), ensure_ascii=False)


_FLAGS = ("stop_after_first", "at_least_one")


def _structure(raw: Any) -> TagStructure:
    if not isinstance(raw, dict):
        raise GrammarError(f"structural_tag: each structure must be an object, got {raw!r}")
    unknown = set(raw) - {"begin", "schema", "parameters", "end"}
    if unknown:
        raise GrammarError(f"structural_tag: unknown structure fields {sorted(unknown)} "
                           f"(expected 'begin', 'schema', 'end')")
    # SGLang accepts 'parameters' as an alias of 'schema'
    schema = raw.get("schema", raw.get("parameters"))
    if schema is None:
        raise GrammarError("structural_tag: each structure needs a 'schema'")
    return TagStructure(raw.get("begin"), schema, raw.get("end", ""))


def free_text_without(triggers: tuple[str, ...]) -> ra.Node:
    """Any text in which no trigger occurs."""
    any_trigger = ra.alt(*(ra.lit(t) for t in triggers))
    return ra.constrained(ra.star(ANY), forbid=[ra.seq(ra.star(ANY), any_trigger,
                                                       ra.star(ANY))], terminator="$")


def text_until(trigger: str, triggers: tuple[str, ...]) -> ra.Node:
    """Text whose first occurrence of any trigger ends at its end and is ``trigger``."""
    any_trigger = ra.alt(*(ra.lit(t) for t in triggers))
    base = ra.seq(ra.star(ANY), ra.lit(trigger))
    earlier = ra.seq(ra.star(ANY), any_trigger, ra.repeat(ANY, 1, None))
    return ra.constrained(base, forbid=[earlier], terminator="")


def structural_tag_to_node(tag: StructuralTag, schema_to_node: Callable[[Any], ra.Node]
                           ) -> ra.Node:
    """The regex tree of ``tag``; ``schema_to_node`` compiles one structure's schema."""
    bodies = {id(s): ra.seq(schema_to_node(s.schema), ra.lit(s.end)) for s in tag.structures}
    segments = []
    for trigger in dict.fromkeys(tag.triggers):
        rests = [ra.seq(ra.lit(s.begin[len(trigger):]), bodies[id(s)])
                 for s in tag.structures if s.begin.startswith(trigger)]
        if rests:
            segments.append(ra.seq(text_until(trigger, tag.triggers), ra.alt(*rests)))
    tail = free_text_without(tag.triggers)
    if tag.at_least_one:
        first = ra.alt(*(ra.seq(ra.lit(s.begin), bodies[id(s)]) for s in tag.structures))
        return first if tag.stop_after_first else ra.seq(first, ra.star(ra.alt(*segments)), tail)
    if tag.stop_after_first:
        return ra.alt(tail, *segments)
    return ra.seq(ra.star(ra.alt(*segments)), tail)
