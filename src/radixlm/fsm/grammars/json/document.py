"""One JSON Schema document: loading, its draft, local ``$ref`` targets, anchors, recursion.

Everything here depends on the document alone, never on how it is compiled: which draft's
keywords and formats apply, where a reference points, which references can reach themselves
(only those count towards the recursion limit), and exact validation of a value against a
sub-schema (``jsonschema``, used to filter ``enum``/``const``).
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

from .deferred_iri_syntax import defer_iri_syntax

defer_iri_syntax()  # before jsonschema's first import (it would build a parser: 2.5 s)

import jsonschema  # noqa: E402

from ...errors import GrammarError  # noqa: E402
from .facts import Ctx  # noqa: E402
from .formats import DRAFT_FORMATS  # noqa: E402

_LEGACY_REF_DRAFTS = ("Draft3Validator", "Draft4Validator", "Draft6Validator", "Draft7Validator")
_BOOLEAN_EXCLUSIVE_DRAFTS = ("Draft3Validator", "Draft4Validator")
# How deeply a schema document may nest (objects and arrays, counted as JSON levels). The
# compiler walks sub-schemas recursively, so an unbounded document would exhaust Python's
# stack; real schemas stay far below this (an object property costs two levels).
MAX_SCHEMA_DEPTH = 64


def load_schema(schema: Any) -> Any:
    """A schema from JSON text, a dict/bool, or a Pydantic model class, nested at most
    :data:`MAX_SCHEMA_DEPTH` levels deep."""
    if isinstance(schema, str):
        try:
            doc = json.loads(schema)
        except json.JSONDecodeError as exc:
            raise GrammarError(f"JSON schema is not valid JSON: {exc}") from exc
        except RecursionError:  # the decoder's own stack bound, far past ours
            raise _too_deep() from None
    elif isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        doc = schema.model_json_schema()
    elif isinstance(schema, (dict, bool)):
        doc = schema
    else:
        raise GrammarError(f"JSON schema: expected JSON text, a dict, a bool or a Pydantic "
                           f"model class, got {type(schema).__name__}")
    if nesting_depth(doc, MAX_SCHEMA_DEPTH) > MAX_SCHEMA_DEPTH:
        raise _too_deep()
    return doc


def _too_deep() -> GrammarError:
    return GrammarError(f"JSON schema is nested more than {MAX_SCHEMA_DEPTH} levels deep "
                        f"(objects and arrays); flatten it or use $defs with $ref")


def nesting_depth(value: Any, limit: int) -> int:
    """How deeply ``value`` nests lists and dicts (a scalar is 0), counted without recursion;
    stops early and returns ``limit + 1`` once the depth passes ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else (
            node if isinstance(node, list) else None)
        if children is None:
            continue
        if depth > limit:
            return limit + 1
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children)
    return deepest


def _pointer_get(doc: Any, pointer: str, ref: str) -> Any:
    node = doc
    if pointer in ("", "/"):
        return node if pointer == "" else node.get("", None)
    for raw in pointer.lstrip("/").split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            raise GrammarError(f"$ref {ref!r} does not resolve inside the schema")
    return node


def _collect_anchors(doc: Any) -> dict[str, Any]:
    """Plain-name anchors (``$anchor``, ``$id``/``id`` of the form ``#name``) and ids."""
    out: dict[str, Any] = {}
    stack = [doc]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in ("$anchor", "$id", "id"):
                value = node.get(key)
                if isinstance(value, str):
                    out.setdefault(value if key != "$anchor" else "#" + value, node)
            stack.extend(v for k, v in node.items() if k not in ("enum", "const", "examples"))
        elif isinstance(node, list):
            stack.extend(node)
    return out


def _refs_in(node: Any) -> set[str]:
    """The ``$ref`` strings anywhere below ``node`` (values of enum/const are data)."""
    found, stack = set(), [node]
    while stack:
        n = stack.pop()
        if isinstance(n, dict):
            if isinstance(n.get("$ref"), str):
                found.add(n["$ref"])
            stack.extend(v for k, v in n.items() if k not in ("enum", "const"))
        elif isinstance(n, list):
            stack.extend(n)
    return found


class SchemaDocument:
    """A loaded schema with its draft's rules and its reference graph."""

    def __init__(self, schema: Any) -> None:
        self.root = load_schema(schema)
        root_for_draft = self.root if isinstance(self.root, dict) else {}
        cls = jsonschema.validators.validator_for(root_for_draft,
                                                  default=jsonschema.Draft202012Validator)
        self.validator_cls = cls
        self.legacy_ref = cls.__name__ in _LEGACY_REF_DRAFTS  # $ref overrides its siblings
        self.boolean_exclusive = cls.__name__ in _BOOLEAN_EXCLUSIVE_DRAFTS
        if cls.__name__ == "Draft3Validator":
            raise GrammarError("draft-03 schemas are not supported (use draft-04 or later)")
        self.validator = cls(self.root, format_checker=cls.FORMAT_CHECKER)
        # keywords and formats the document's draft defines; others are annotations there
        self.keywords = frozenset(cls.VALIDATORS)
        self.checked_formats = DRAFT_FORMATS.get(cls.__name__,
                                                 DRAFT_FORMATS["Draft202012Validator"])
        # draft 6+ counts 1.0 as an integer; draft 4 does not
        self.integer_fraction = cls.__name__ not in ("Draft4Validator",)
        self._anchors = _collect_anchors(self.root)
        self._validators: dict[int, tuple[Any, Any]] = {}  # id(sub-schema) -> (it, validator)
        self._recursive_refs = self._find_recursive_refs()

    # -- references -------------------------------------------------------------------------

    def resolve_ref(self, ref: str) -> Any:
        """Target of a local ``$ref`` (JSON pointer, anchor, or the document's own id)."""
        if not isinstance(ref, str):
            raise GrammarError(f"$ref must be a string, got {ref!r}")
        if ref in self._anchors:
            return self._anchors[ref]
        base, _, fragment = ref.partition("#")
        root_id = self.root.get("$id", self.root.get("id")) if isinstance(self.root, dict) else None
        if base and base != (root_id or "").partition("#")[0]:
            if base in self._anchors:
                return _pointer_get(self._anchors[base], fragment, ref)
            raise GrammarError(f"$ref {ref!r}: only references inside the schema are supported")
        if fragment and not fragment.startswith("/"):
            if "#" + fragment in self._anchors:
                return self._anchors["#" + fragment]
            raise GrammarError(f"$ref {ref!r}: unknown anchor")
        return _pointer_get(self.root, fragment, ref)

    def _find_recursive_refs(self) -> frozenset[str]:
        """Refs that can reach themselves (only those count towards the recursion limit)."""
        graph: dict[str, set[str]] = {}
        todo = list(_refs_in(self.root))
        while todo:
            ref = todo.pop()
            if ref in graph:
                continue
            try:
                target = self.resolve_ref(ref)
            except GrammarError:
                graph[ref] = set()
                continue
            graph[ref] = _refs_in(target)
            todo.extend(graph[ref] - graph.keys())
        recursive = set()
        for start in graph:
            seen, stack = set(), list(graph[start])
            while stack:
                r = stack.pop()
                if r == start:
                    recursive.add(start)
                    break
                if r not in seen:
                    seen.add(r)
                    stack.extend(graph.get(r, ()))
        return frozenset(recursive)

    def enter_ref(self, ref: str, ctx: Ctx, max_depth: int) -> Ctx | None:
        """The context inside ``ref``; None when ``ref`` is recursive and already expanded
        ``max_depth`` times on the way to ``ctx``."""
        if ref not in self._recursive_refs:
            return ctx
        counts = dict(ctx)
        if counts.get(ref, 0) >= max_depth:
            return None
        counts[ref] = counts.get(ref, 0) + 1
        return tuple(sorted(counts.items()))

    # -- the draft's semantics --------------------------------------------------------------

    def valid_in(self, value: Any, sources: list[Any]) -> bool:
        """Whether ``value`` satisfies every source schema (exact, via ``jsonschema``)."""
        for src in sources:
            try:
                if not self._validator_of(src).is_valid(value):
                    return False
            except jsonschema.exceptions.RefResolutionError as exc:  # pragma: no cover
                raise GrammarError(f"cannot resolve a reference: {exc}") from exc
        return True

    def _validator_of(self, src: Any) -> Any:
        """The document's validator on the sub-schema ``src``, made once per sub-schema (an
        enum's values are checked against the same sources one by one)."""
        hit = self._validators.get(id(src))
        if hit is None or hit[0] is not src:  # the entry keeps src alive: ids are not reused
            hit = self._validators[id(src)] = (src, self.validator.evolve(schema=src))
        return hit[1]

    def bound_schema(self, side: str, value: Decimal, inclusive: bool) -> dict:
        """A number schema for ``x <= value`` (side "max") or ``x >= value`` ("min"), in the
        document's draft spelling; strict when not ``inclusive``."""
        num = int(value) if value == value.to_integral_value() else float(value)
        plain = "maximum" if side == "max" else "minimum"
        excl = "exclusiveMaximum" if side == "max" else "exclusiveMinimum"
        if inclusive:
            return {"type": "number", plain: num}
        if self.boolean_exclusive:
            return {"type": "number", plain: num, excl: True}
        return {"type": "number", excl: num}
