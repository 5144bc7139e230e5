"""A JSON Schema conjunction in normalised form: what :mod:`.compiler` compiles.

:class:`Facts` accumulates the keywords of every schema that applies at one place of the
instance (``allOf`` members, ``$ref`` targets, distributed ``anyOf`` branches): types are
intersected, bounds tightened, patterns and formats collected, object and array keywords kept
per source (``additionalProperties`` only means something next to its own ``properties``).
Sub-schemas are carried as :data:`Sub` pairs ``(schema, ctx)`` where ``ctx`` counts how often
each recursive ``$ref`` has been expanded on the way there, which bounds recursion.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

Ctx = tuple[tuple[str, int], ...]
Sub = tuple[Any, Ctx]

ALL_TYPES = frozenset({"null", "boolean", "object", "array", "string", "number"})
JSON_TYPES = ALL_TYPES | {"integer"}


def expand_types(types: frozenset[str] | None) -> frozenset[str]:
    """Types with ``number`` implying ``integer`` (None = every type)."""
    t = ALL_TYPES if types is None else types
    return t | {"integer"} if "number" in t else t


def intersect_types(a: frozenset[str] | None, b: frozenset[str] | None) -> frozenset[str] | None:
    """Intersection of two type sets (None = all)."""
    if a is None:
        return b
    if b is None:
        return a
    out = expand_types(a) & expand_types(b)
    return out - {"integer"} if "number" in out else out


def json_type_of(value: Any) -> str:
    """JSON Schema type name of a Python JSON value (integers, including 1.0, are integer)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def to_decimal(value: Any, keyword: str) -> Decimal:
    """A numeric keyword value as an exact Decimal (bools count as 0/1, as in ``jsonschema``)."""
    if isinstance(value, bool):
        return Decimal(int(value))
    if isinstance(value, int):
        return Decimal(value)
    if isinstance(value, float):
        return Decimal(repr(value))
    raise SchemaShapeError(f"{keyword} must be a number, got {value!r}")


class SchemaShapeError(ValueError):
    """A keyword has a value of the wrong shape."""


@dataclass
class ObjectPart:
    """One source schema's object keywords (additionalProperties is relative to them)."""

    properties: dict[str, Sub]
    patterns: list[tuple[str, Sub]]
    additional: Sub | None  # None: any value


@dataclass
class ArrayPart:
    """One source schema's array keywords: positional schemas, then the rest."""

    prefix: list[Sub]
    rest: Sub | None  # None: any value


@dataclass
class Facts:
    """The conjunction of the schemas that apply at one place."""

    sources: list[Any] = field(default_factory=list)
    unsat: bool = False
    types: frozenset[str] | None = None
    enum: list[Any] | None = None
    # strings
    min_len: int = 0
    max_len: int | None = None
    patterns: list[str] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    not_patterns: list[str] = field(default_factory=list)
    not_formats: list[str] = field(default_factory=list)  # checked formats the string fails
    not_values: list[Any] = field(default_factory=list)
    # numbers
    lo: Decimal | None = None
    lo_strict: bool = False
    hi: Decimal | None = None
    hi_strict: bool = False
    multiples: list[Decimal] = field(default_factory=list)
    not_multiples: list[Decimal] = field(default_factory=list)
    non_integer: bool = False
    # objects
    objects: list[ObjectPart] = field(default_factory=list)
    required: list[str] = field(default_factory=list)
    property_names: list[Sub] = field(default_factory=list)
    min_props: int = 0
    max_props: int | None = None
    # (key schema, value schema): some member's key and value satisfy both (from a negated
    # propertyNames/patternProperties/additionalProperties)
    some_members: list[tuple[Sub, Sub]] = field(default_factory=list)
    # arrays
    arrays: list[ArrayPart] = field(default_factory=list)
    min_items: int = 0
    max_items: int | None = None
    contains: list[Sub] = field(default_factory=list)
    unique: bool = False
    # pending combinators
    any_of: list[list[Sub]] = field(default_factory=list)
    one_of: list[list[Sub]] = field(default_factory=list)
    nots: list[Sub] = field(default_factory=list)

    def copy(self) -> Facts:
        """A copy whose lists can be changed independently (sub-schemas are shared)."""
        return copy.copy(self)._copy_lists()

    def _copy_lists(self) -> Facts:
        for name, value in vars(self).items():
            if isinstance(value, list):
                setattr(self, name, list(value))
        return self

    def restrict_types(self, types: frozenset[str] | None) -> None:
        """Intersect the allowed types."""
        self.types = intersect_types(self.types, types)
        if self.types is not None and not self.types:
            self.unsat = True

    def remove_types(self, removed: frozenset[str]) -> None:
        """Exclude types (``not: {type: ...}``); removing integer from number keeps fractions."""
        current = expand_types(self.types)
        if "number" in removed:
            removed = removed | {"integer"}
        if "integer" in removed and "number" in current and "number" not in removed:
            self.non_integer = True
        left = current - removed
        self.types = frozenset(left - {"integer"} if "number" in left else left)
        if not self.types:
            self.unsat = True

    def tighten_lo(self, value: Decimal, strict: bool) -> None:
        """Raise the lower bound."""
        if self.lo is None or value > self.lo or (value == self.lo and strict):
            self.lo, self.lo_strict = value, strict

    def tighten_hi(self, value: Decimal, strict: bool) -> None:
        """Lower the upper bound."""
        if self.hi is None or value < self.hi or (value == self.hi and strict):
            self.hi, self.hi_strict = value, strict

    def add_required(self, names: list[str]) -> None:
        """Add required property names (order kept, no duplicates)."""
        for n in names:
            if n not in self.required:
                self.required.append(n)

    def effective_types(self) -> frozenset[str]:
        """Types an instance can have (``integer`` listed when only integers are possible)."""
        if self.enum is not None:
            return frozenset(json_type_of(v) for v in self.enum)
        return expand_types(self.types)
