"""What the keyword handlers and the per-type builders need from the compiler.

The handlers (:mod:`.keywords`) and the builders (:mod:`.objects`, :mod:`.arrays`,
:mod:`.numbers`, :mod:`.negation`) are written against these protocols, not against
:class:`.compiler.SchemaCompiler`, so none of them imports the compiler and the compiler
imports all of them: the dependency runs one way.
"""

from __future__ import annotations

from typing import Any, Protocol

from ...regex import tree as ra
from .document import SchemaDocument
from .facts import Ctx, Sub
from .options import JsonSchemaOptions
from .strings import StringEncoder


class FoldContext(Protocol):
    """Folding keywords into :class:`.facts.Facts`: the document, refusals and references."""

    document: SchemaDocument

    def unsupported(self, keyword: str, detail: str) -> None:
        """Refuse (strict) or note and skip (lenient) a keyword that cannot be enforced."""
        ...

    def keep(self, schema: Any, ctx: Ctx) -> Sub:
        """A synthetic sub-schema kept alive as long as the compiler (memo keys are ids)."""
        ...

    def enter_ref(self, ref: str, ctx: Ctx) -> Ctx | None:
        """The context inside ``ref``; None when the recursion limit cuts it (noted)."""
        ...


class SchemaContext(FoldContext, Protocol):
    """Building one type's regex tree: options, layout pieces and sub-schema compilation."""

    options: JsonSchemaOptions
    ws: ra.Node  # whitespace allowed between tokens
    encoder: StringEncoder

    def compile_sub(self, sub: Sub) -> ra.Node:
        """Regex tree of the JSON values matching a sub-schema."""
        ...

    def merge_subs(self, subs: list[Sub | None]) -> Sub:
        """One sub-schema for the conjunction of several (None = anything)."""
        ...

    def separator(self) -> ra.Node:
        """``,`` with whitespace around."""
        ...

    def literal(self, value: Any) -> ra.Node:
        """The JSON text of one value."""
        ...

    def string_format_nodes(self, formats: list[str]) -> list[ra.Node]:
        """Decoded-string regexes of the formats (unknown formats are annotations)."""
        ...

    def pattern_matches(self, pattern: str, text: str) -> bool:
        """JSON Schema pattern test on a plain string (search semantics)."""
        ...
