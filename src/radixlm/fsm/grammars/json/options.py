"""How a JSON Schema is compiled: the explicit bounds that keep the language regular."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..whitespace import WhitespacePolicy


@dataclass(frozen=True)
class JsonSchemaOptions:
    """How a schema is compiled. Every cap is a documented narrowing, never a silent one."""

    whitespace: WhitespacePolicy = field(default_factory=WhitespacePolicy)
    lenient: bool = False
    max_recursion_depth: int = 3
    any_value_depth: int = 16
    max_string_length: int | None = None  # strings without pattern/format
    max_array_items: int | None = None
    max_object_properties: int | None = None  # additional properties
    max_number_digits: int | None = None
    max_expansions: int = 4096

    def __post_init__(self) -> None:
        if not isinstance(self.whitespace, WhitespacePolicy):
            raise ValueError(f"whitespace must be a WhitespacePolicy, got {self.whitespace!r}")
        for name in ("max_recursion_depth", "any_value_depth"):
            if not 0 <= getattr(self, name) <= 64:
                raise ValueError(f"{name} must be in [0, 64], got {getattr(self, name)}")
        for name in ("max_string_length", "max_array_items", "max_object_properties",
                     "max_number_digits"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be None or >= 1, got {value}")
        if self.max_expansions < 1:
            raise ValueError(f"max_expansions must be >= 1, got {self.max_expansions}")
