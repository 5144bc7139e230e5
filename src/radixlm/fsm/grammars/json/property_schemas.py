"""The schema a property's value must satisfy, across every object part of the facts.

One source's ``properties`` entry and every matching ``patternProperties`` entry apply to a
key; ``additionalProperties`` only when neither does. Used to build objects
(:mod:`.objects`) and to prove ``oneOf`` branches disjoint (:mod:`.negation`).
"""

from __future__ import annotations

from .context import SchemaContext
from .facts import Facts, ObjectPart, Sub


def part_value_subs(c: SchemaContext, part: ObjectPart, name: str) -> list[Sub | None]:
    """Schemas one source imposes on the value of key ``name``."""
    matching = [sub for pattern, sub in part.patterns if c.pattern_matches(pattern, name)]
    if name in part.properties:
        return [part.properties[name], *matching]
    return matching if matching else [part.additional]


def value_sub(c: SchemaContext, f: Facts, name: str) -> Sub:
    """The merged schema of key ``name`` under every object part of ``f``."""
    subs: list[Sub | None] = []
    for part in f.objects:
        subs.extend(part_value_subs(c, part, name))
    return c.merge_subs(subs)
