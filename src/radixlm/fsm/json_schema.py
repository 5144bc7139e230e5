"""JSON Schema → regex, our own: every keyword enforced exactly or refused by name.

The schema is compiled to a :mod:`regex_ast` tree (shared sub-schemas stay shared), which the
byte automaton consumes directly; :func:`json_schema_to_regex` prints it. Differences from
outlines-core's builder, on purpose:

* ``pattern`` has JSON Schema's search semantics (unanchored unless ``^``/``$``), is grouped,
  and is matched against the *decoded* string (escapes in the JSON text are accounted for);
  it is intersected with ``minLength``/``maxLength``/``format`` instead of being dropped.
* ``allOf`` merges schemas; ``anyOf`` distributes over the surrounding keywords; ``oneOf`` is
  an alternation only when its branches are provably disjoint, else refused.
* ``additionalProperties`` (false, true, schema) is honoured next to ``properties``, and
  additional keys can never repeat a declared name; ``patternProperties``, ``propertyNames``,
  ``min/maxProperties``, ``dependentRequired``/``dependentSchemas`` are enforced.
* Boolean and type-less sub-schemas work; numeric bounds and ``multipleOf`` (for divisors
  2^a·5^b, or bounded ranges) compile to digit regexes; ``not``, ``if/then/else`` are enforced
  for the forms that reduce to the above.
* Objects keep the schema's property order (declared properties first, then additional ones).

Bounds that make the language regular are explicit options: the recursion depth of ``$ref``
cycles, the nesting depth of free-form values, and optional length caps for strings, arrays,
additional properties and number digits (``JsonSchemaOptions``).
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any
from urllib.parse import unquote

import jsonschema

from . import regex_ast as ra
from .errors import GrammarBudgetError, GrammarError
from .formats import DRAFT_FORMATS, SUPPORTED_FORMATS, format_node
from .json_strings import ANY_CHAR, StringEncoder, quoted, string_content
from .regex_parser import search_node
from .schema_arrays import array_node
from .schema_facts import (
    ANNOTATIONS,
    CONSTRAINING,
    JSON_TYPES,
    ArrayPart,
    Ctx,
    Facts,
    ObjectPart,
    SchemaShapeError,
    Sub,
    expand_types,
    json_type_of,
    to_decimal,
)
from .schema_negation import apply_not, provably_disjoint
from .schema_numbers import number_node
from .schema_objects import object_node
from .whitespace import WhitespacePolicy

_ANY_VALUE: dict[tuple, ra.Node] = {}  # free-form value trees, shared across compilers
_LEGACY_REF_DRAFTS = ("Draft3Validator", "Draft4Validator", "Draft6Validator", "Draft7Validator")
_BOOLEAN_EXCLUSIVE_DRAFTS = ("Draft3Validator", "Draft4Validator")


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


def load_schema(schema: Any) -> Any:
    """A schema from JSON text, a dict/bool, or a Pydantic model class."""
    if isinstance(schema, str):
        try:
            return json.loads(schema)
        except json.JSONDecodeError as exc:
            raise GrammarError(f"JSON schema is not valid JSON: {exc}") from exc
    if isinstance(schema, type) and hasattr(schema, "model_json_schema"):
        return schema.model_json_schema()
    if isinstance(schema, (dict, bool)):
        return schema
    raise GrammarError(f"JSON schema: expected JSON text, a dict, a bool or a Pydantic model "
                       f"class, got {type(schema).__name__}")


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


class SchemaCompiler:
    """Compiles one schema document; see the module docstring for the semantics."""

    def __init__(self, schema: Any, options: JsonSchemaOptions,
                 deadline: Callable[[], None] | None = None) -> None:
        self.root = load_schema(schema)
        self.options = options
        self.check_deadline = deadline or (lambda: None)
        root_for_draft = self.root if isinstance(self.root, dict) else {}
        cls = jsonschema.validators.validator_for(root_for_draft,
                                                  default=jsonschema.Draft202012Validator)
        self.validator_cls = cls
        self.legacy_ref = cls.__name__ in _LEGACY_REF_DRAFTS
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
        self.ws = options.whitespace.node()
        self.encoder = StringEncoder()
        self.notes: list[str] = []
        self._anchors = _collect_anchors(self.root)
        self._recursive_refs = self._find_recursive_refs()
        self._memo: dict[tuple[int, Ctx], ra.Node] = {}
        self._synthetic: dict[tuple, dict] = {}
        self._keep: list[Any] = []
        self._expansions = 0
        self._strict = 0  # > 0: refuse even under lenient (an exact rewrite is being tried)
        self._pattern_builder = None

    # -- entry ------------------------------------------------------------------------------

    def compile(self) -> ra.Node:
        """The regex tree of the whole document."""
        node = self.compile_sub((self.root, ()))
        if node is ra.EMPTY:
            raise GrammarError("the schema accepts no JSON value (within the recursion and "
                               "length limits)")
        return node

    def unsupported(self, keyword: str, detail: str) -> None:
        """Refuse (strict) or note and skip (lenient) a keyword we cannot enforce."""
        msg = f"unsupported JSON Schema keyword {keyword!r}: {detail}"
        if not self.options.lenient or self._strict:
            raise GrammarError(msg)
        warnings.warn(f"{msg} (ignored: lenient=True)", stacklevel=2)
        self.notes.append(msg)

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

        def refs_in(node: Any) -> set[str]:
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

        todo = list(refs_in(self.root))
        while todo:
            ref = todo.pop()
            if ref in graph:
                continue
            try:
                target = self.resolve_ref(ref)
            except GrammarError:
                graph[ref] = set()
                continue
            graph[ref] = refs_in(target)
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

    def enter_ref(self, ref: str, ctx: Ctx) -> Ctx | None:
        """The context inside ``ref``; None when the recursion limit cuts it."""
        if ref not in self._recursive_refs:
            return ctx
        counts = dict(ctx)
        if counts.get(ref, 0) >= self.options.max_recursion_depth:
            self.notes.append(f"recursion through $ref {ref!r} cut at depth "
                              f"{self.options.max_recursion_depth}")
            return None
        counts[ref] = counts.get(ref, 0) + 1
        return tuple(sorted(counts.items()))

    # -- absorbing keywords -------------------------------------------------------------------

    def facts_of(self, sub: Sub) -> Facts:
        """Facts of one sub-schema."""
        facts = Facts()
        self.absorb(facts, sub)
        return facts

    def absorb(self, f: Facts, sub: Sub) -> None:
        """Conjoin ``sub`` into ``f``."""
        schema, ctx = sub
        if schema is True:
            return
        if schema is False:
            f.unsat = True
            return
        if not isinstance(schema, dict):
            raise GrammarError(f"a schema must be an object or a boolean, got {schema!r}")
        f.sources.append(schema)
        if "$ref" in schema:
            inner = self.enter_ref(schema["$ref"], ctx)
            if inner is None:
                f.unsat = True
                return
            self.absorb(f, (self.resolve_ref(schema["$ref"]), inner))
            if self.legacy_ref:
                return  # drafts <= 7 ignore the siblings of $ref
        try:
            self._absorb_keywords(f, schema, ctx)
        except SchemaShapeError as exc:
            raise GrammarError(f"invalid schema: {exc}") from exc

    def _absorb_keywords(self, f: Facts, schema: dict, ctx: Ctx) -> None:
        for key, value in schema.items():
            if key in ANNOTATIONS or key == "$ref" or key not in self.keywords:
                continue  # keywords the draft does not define are annotations
            handler = _HANDLERS.get(key)
            if handler is not None:
                handler(self, f, schema, value, ctx)
            elif key in ("$dynamicRef", "$recursiveRef"):
                self.unsupported(key, "dynamic references are not supported")
        self._absorb_object(f, schema, ctx)
        self._absorb_array(f, schema, ctx)

    def _absorb_object(self, f: Facts, schema: dict, ctx: Ctx) -> None:
        if not any(k in schema for k in ("properties", "patternProperties",
                                         "additionalProperties")):
            return
        props = schema.get("properties", {})
        pats = schema.get("patternProperties", {})
        if not isinstance(props, dict) or not isinstance(pats, dict):
            raise GrammarError("properties and patternProperties must be objects")
        additional = schema.get("additionalProperties", True)
        f.objects.append(ObjectPart(
            properties={k: (v, ctx) for k, v in props.items()},
            patterns=[(p, (v, ctx)) for p, v in pats.items()],
            additional=None if additional is True else (additional, ctx)))

    def _absorb_array(self, f: Facts, schema: dict, ctx: Ctx) -> None:
        items = schema.get("items", True)
        if "prefixItems" in schema and "prefixItems" in self.keywords:
            prefix = schema["prefixItems"]
            rest = items
        elif isinstance(items, list):
            if "additionalItems" not in self.keywords:
                self.unsupported("items", "the array form of items is not part of this draft "
                                          "(use prefixItems)")
                return
            prefix, rest = items, schema.get("additionalItems", True)
        else:
            prefix, rest = [], items
        if not isinstance(prefix, list):
            raise GrammarError("prefixItems must be an array")
        if prefix or rest is not True:
            f.arrays.append(ArrayPart([(s, ctx) for s in prefix],
                                      None if rest is True else (rest, ctx)))

    # -- compiling ----------------------------------------------------------------------------

    def compile_sub(self, sub: Sub) -> ra.Node:
        """Regex tree of the JSON values matching a sub-schema (memoised)."""
        schema, ctx = sub
        if schema is True or (isinstance(schema, dict) and not (schema.keys() & CONSTRAINING)):
            return self.any_value(self.options.any_value_depth)
        key = (id(schema), ctx)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        self.check_deadline()
        node = self.compile_facts(self.facts_of(sub))
        self._memo[key] = node
        self._keep.append(schema)
        return node

    def keep(self, schema: Any, ctx: Ctx) -> Sub:
        """A synthetic sub-schema kept alive for the compiler's lifetime (memo keys are ids)."""
        self._keep.append(schema)
        return (schema, ctx)

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

    def merge_subs(self, subs: list[Sub | None]) -> Sub:
        """One sub-schema for the conjunction of several (None = anything)."""
        real = [s for s in subs if s is not None and s[0] is not True]
        if any(s[0] is False for s in real):
            return (False, ())
        if not real:
            return (True, ())
        if len(real) == 1:
            return real[0]
        counts: dict[str, int] = {}
        for _, ctx in real:
            for ref, n in ctx:
                counts[ref] = max(counts.get(ref, 0), n)
        ctx = tuple(sorted(counts.items()))
        key = (tuple(id(s) for s, _ in real), ctx)
        synthetic = self._synthetic.get(key)
        if synthetic is None:
            synthetic = {"allOf": [s for s, _ in real]}
            self._synthetic[key] = synthetic
            self._keep.extend(s for s, _ in real)
        return (synthetic, ctx)

    def _count_expansion(self) -> None:
        self._expansions += 1
        if self._expansions > self.options.max_expansions:
            raise GrammarBudgetError("schema expansion", self.options.max_expansions,
                                     "too many anyOf/oneOf/if combinations to distribute")

    def compile_facts(self, f: Facts) -> ra.Node:
        """Regex tree of the values satisfying every fact in ``f``."""
        self._count_expansion()
        if f.unsat:
            return ra.EMPTY
        if f.enum is not None:
            return ra.alt(*(self.literal(v) for v in f.enum if self.valid_in(v, f.sources)))
        if f.nots:
            rest = f.copy()
            negated = rest.nots.pop(0)
            apply_not(self, rest, negated)
            return self.compile_facts(rest)
        if f.any_of:
            return self._distribute(f, f.any_of[0], "any_of", exclusive=False)
        if f.one_of:
            return self._distribute(f, f.one_of[0], "one_of", exclusive=True)
        return self.compile_types(f)

    def _distribute(self, f: Facts, group: list[Sub], attr: str, exclusive: bool) -> ra.Node:
        """anyOf/oneOf: one alternative per branch, each with the surrounding facts.

        For oneOf, a branch that may overlap another also gets ``not`` of that other branch
        (exactly one must hold); when such a ``not`` cannot be enforced, oneOf is refused.
        """
        rest = f.copy()
        getattr(rest, attr).pop(0)
        branches: list[tuple[Sub, Facts]] = []
        for sub in group:
            g = rest.copy()
            self.absorb(g, sub)
            if not g.unsat:
                branches.append((sub, g))
        if exclusive and len(branches) > 1:
            try:
                return ra.alt(*self._exclusive_branches(branches))
            except GrammarError as exc:
                self.unsupported("oneOf", f"branches may overlap and exclusivity cannot be "
                                          f"enforced ({exc}); treated as anyOf")
        return ra.alt(*(self.compile_facts(g) for _, g in branches))

    def _exclusive_branches(self, branches: list[tuple[Sub, Facts]]) -> list[ra.Node]:
        overlaps = [[j for j, (_, b) in enumerate(branches)
                     if j != i and not provably_disjoint(self, a, b)]
                    for i, (_, a) in enumerate(branches)]
        nodes = []
        for (_, g), others in zip(branches, overlaps, strict=True):
            exact = g.copy()
            exact.nots.extend(branches[j][0] for j in others)
            nodes.append(self._compile_strict(exact))
        return nodes

    def _compile_strict(self, f: Facts) -> ra.Node:
        """compile_facts with unsupported keywords raised even under ``lenient``."""
        self._strict += 1
        try:
            return self.compile_facts(f)
        finally:
            self._strict -= 1

    def valid_in(self, value: Any, sources: list[Any]) -> bool:
        """Whether ``value`` satisfies every source schema (exact, via ``jsonschema``)."""
        for src in sources:
            try:
                if not self.validator.evolve(schema=src).is_valid(value):
                    return False
            except jsonschema.exceptions.RefResolutionError as exc:  # pragma: no cover
                raise GrammarError(f"cannot resolve a reference: {exc}") from exc
        return True

    def compile_types(self, f: Facts) -> ra.Node:
        """Alternation over the allowed types."""
        types = expand_types(f.types)
        if "number" in types:
            types = types - {"integer"}
        builders = {"null": self.null_node, "boolean": self.boolean_node,
                    "string": self.string_node, "object": self.object_node,
                    "array": self.array_node}
        options = []
        for t in sorted(types):
            if t in ("number", "integer"):
                options.append(self.number_node(f, integer_only=(t == "integer")))
                continue
            node = builders[t](f)
            excluded = self._excluded(f, t) if t in ("object", "array") else []
            if excluded and node is not ra.EMPTY:
                # containers are self-delimiting: an empty terminator pins the lookahead
                node = ra.constrained(node, forbid=[self.literal(v) for v in excluded],
                                      terminator="")
            options.append(node)
        return ra.alt(*options)

    # -- scalars ------------------------------------------------------------------------------

    def _excluded(self, f: Facts, json_type: str) -> list[Any]:
        return [v for v in f.not_values if json_type_of(v) == json_type]

    def null_node(self, f: Facts) -> ra.Node:
        """``null`` unless excluded."""
        return ra.EMPTY if self._excluded(f, "null") else ra.lit("null")

    def boolean_node(self, f: Facts) -> ra.Node:
        """``true``/``false`` minus excluded values."""
        excluded = self._excluded(f, "boolean")
        return ra.alt(*(ra.lit(json.dumps(v)) for v in (True, False) if v not in excluded))

    def string_node(self, f: Facts) -> ra.Node:
        """A JSON string with the length, pattern, format and exclusion facts."""
        decoded = [search_node(p, ANY_CHAR) for p in f.patterns]
        decoded += self.string_format_nodes(f.formats)
        max_len = f.max_len
        cap = self.options.max_string_length
        if cap is not None and not decoded:  # patterns and formats keep their own shape
            max_len = max(f.min_len, cap if max_len is None else min(max_len, cap))
        forbid = [ra.lit(v) for v in self._excluded(f, "string")]
        forbid += [search_node(p, ANY_CHAR) for p in f.not_patterns]
        forbid += self.string_format_nodes(f.not_formats)
        content = string_content(self.encoder, f.min_len, max_len, decoded, forbid)
        return quoted(content) if content is not ra.EMPTY else ra.EMPTY

    def string_format_nodes(self, formats: list[str]) -> list[ra.Node]:
        """Decoded-string regexes of the formats (unknown formats are annotations)."""
        out = []
        for name in formats:
            if name not in self.checked_formats:
                self.notes.append(f"format {name!r} is an annotation in this draft (not checked)")
            elif name in SUPPORTED_FORMATS:
                out.append(format_node(name))
            else:
                self.unsupported("format", f"format {name!r} is not supported")
        return out

    def number_node(self, f: Facts, integer_only: bool) -> ra.Node:
        """A JSON number (or integer) with bounds, divisors and exclusions."""
        return number_node(self, f, integer_only)

    # -- literals and free values ---------------------------------------------------------------

    def literal(self, value: Any) -> ra.Node:
        """The JSON text of one value (object keys in the value's order)."""
        ws = self.ws
        if isinstance(value, dict):
            members = [ra.seq(quoted(self.encoder.literal(k)), ws, ra.lit(":"), ws,
                              self.literal(v)) for k, v in value.items()]
            return self._container("{", "}", members)
        if isinstance(value, list):
            return self._container("[", "]", [self.literal(v) for v in value])
        if isinstance(value, str):
            return quoted(self.encoder.literal(value))
        if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
            return ra.alt(ra.lit(str(int(value))), ra.lit(repr(value)))
        if isinstance(value, int) and not isinstance(value, bool):
            if not self.integer_fraction:  # draft 4: 1.0 is not an integer
                return ra.lit(str(value))
            return ra.alt(ra.lit(str(value)), ra.lit(f"{value}.0"))
        return ra.lit(json.dumps(value))

    def _container(self, open_: str, close: str, items: list[ra.Node]) -> ra.Node:
        ws = self.ws
        if not items:
            return ra.seq(ra.lit(open_), ws, ra.lit(close))
        parts = [ra.lit(open_), ws, items[0]]
        for item in items[1:]:
            parts += [ws, ra.lit(","), ws, item]
        return ra.seq(*parts, ws, ra.lit(close))

    def separator(self) -> ra.Node:
        """``,`` with whitespace around."""
        return ra.seq(self.ws, ra.lit(","), self.ws)

    def any_value(self, depth: int) -> ra.Node:
        """Any JSON value nested at most ``depth`` containers deep (with the length caps).

        Shared by every compiler with the same whitespace and caps (trees are immutable).
        """
        o = self.options
        key = (o.whitespace, o.max_string_length, o.max_number_digits, o.max_array_items,
               o.max_object_properties, depth)
        hit = _ANY_VALUE.get(key)
        if hit is not None:
            return hit
        node = self._build_any_value(depth)
        if len(_ANY_VALUE) > 1024:
            _ANY_VALUE.clear()
        _ANY_VALUE[key] = node
        return node

    def _build_any_value(self, depth: int) -> ra.Node:
        scalars = ra.alt(ra.lit("null"), ra.lit("true"), ra.lit("false"),
                         self.number_node(Facts(), integer_only=False),
                         self.string_node(Facts()))
        if depth <= 0:
            node = scalars
        else:
            inner = self.any_value(depth - 1)
            key = self.string_node(Facts())
            member = ra.seq(key, self.ws, ra.lit(":"), self.ws, inner)
            obj = self.repeated_container("{", "}", member, 0, self.options.max_object_properties)
            arr = self.repeated_container("[", "]", inner, 0, self.options.max_array_items)
            node = ra.alt(scalars, obj, arr)
        return node

    def repeated_container(self, open_: str, close: str, item: ra.Node, lo: int,
                           hi: int | None) -> ra.Node:
        """``open item (, item){lo-1,hi-1} close`` with whitespace; empty allowed if lo == 0."""
        if hi is not None and hi < lo:
            return ra.EMPTY
        ws = self.ws
        options = []
        if lo == 0:
            options.append(ra.seq(ra.lit(open_), ws, ra.lit(close)))
        if hi != 0 and item is not ra.EMPTY:
            more = ra.repeat(ra.seq(self.separator(), item), max(lo - 1, 0),
                             None if hi is None else hi - 1)
            options.append(ra.seq(ra.lit(open_), ws, item, more, ws, ra.lit(close)))
        return ra.alt(*options)

    # -- containers ---------------------------------------------------------------------------

    def object_node(self, f: Facts) -> ra.Node:
        """An object with the property facts."""
        return object_node(self, f)

    def array_node(self, f: Facts) -> ra.Node:
        """An array with the item facts."""
        return array_node(self, f)

    def pattern_matches(self, pattern: str, text: str) -> bool:
        """JSON Schema pattern test on a plain string (search semantics, our regex engine)."""
        from .derivatives import TermBuilder

        if self._pattern_builder is None:
            self._pattern_builder = TermBuilder()
        term = self._pattern_builder.lower(search_node(pattern, ANY_CHAR))
        return self._pattern_builder.matches(term, text.encode("utf-8"))


# -- keyword handlers -----------------------------------------------------------------------


def _h_type(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or any(n not in JSON_TYPES for n in names):
        raise GrammarError(f"type must be a JSON type name or a list of them, got {value!r}")
    f.restrict_types(frozenset(names))


def _h_enum(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if not isinstance(value, list):
        raise GrammarError(f"enum must be an array, got {value!r}")
    if f.enum is None:
        f.enum = list(value)  # the other sources filter it (valid_in)


def _h_const(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if f.enum is None:
        f.enum = [value]


def _h_all_of(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    for sub in _schema_list("allOf", value):
        c.absorb(f, (sub, ctx))


def _h_any_of(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.any_of.append([(s, ctx) for s in _schema_list("anyOf", value)])


def _h_one_of(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.one_of.append([(s, ctx) for s in _schema_list("oneOf", value)])


def _h_not(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.nots.append((value, ctx))


def _h_if(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    then, else_ = schema.get("then", True), schema.get("else", True)
    if then is True and else_ is True:
        return
    f.any_of.append([c.keep({"allOf": [value, then]}, ctx),
                     c.keep({"allOf": [{"not": value}, else_]}, ctx)])


def _h_min_length(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.min_len = max(f.min_len, _count("minLength", value))


def _h_max_length(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    n = _count("maxLength", value)
    f.max_len = n if f.max_len is None else min(f.max_len, n)


def _h_pattern(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if not isinstance(value, str):
        raise GrammarError(f"pattern must be a string, got {value!r}")
    f.patterns.append(value)


def _h_format(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if isinstance(value, str) and value not in f.formats:
        f.formats.append(value)


def _h_minimum(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    strict = c.boolean_exclusive and schema.get("exclusiveMinimum") is True
    f.tighten_lo(to_decimal(value, "minimum"), strict)


def _h_maximum(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    strict = c.boolean_exclusive and schema.get("exclusiveMaximum") is True
    f.tighten_hi(to_decimal(value, "maximum"), strict)


def _h_exclusive_minimum(c: SchemaCompiler, f: Facts, schema: dict, value: Any,
                         ctx: Ctx) -> None:
    if not c.boolean_exclusive:
        f.tighten_lo(to_decimal(value, "exclusiveMinimum"), True)


def _h_exclusive_maximum(c: SchemaCompiler, f: Facts, schema: dict, value: Any,
                         ctx: Ctx) -> None:
    if not c.boolean_exclusive:
        f.tighten_hi(to_decimal(value, "exclusiveMaximum"), True)


def _h_multiple_of(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    k = to_decimal(value, "multipleOf")
    if k <= 0:
        raise GrammarError(f"multipleOf must be > 0, got {value!r}")
    f.multiples.append(k)


def _h_required(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise GrammarError(f"required must be an array of strings, got {value!r}")
    f.add_required(value)


def _h_property_names(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.property_names.append((value, ctx))


def _h_min_properties(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.min_props = max(f.min_props, _count("minProperties", value))


def _h_max_properties(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    n = _count("maxProperties", value)
    f.max_props = n if f.max_props is None else min(f.max_props, n)


def _h_dependent_required(c: SchemaCompiler, f: Facts, schema: dict, value: Any,
                          ctx: Ctx) -> None:
    if not isinstance(value, dict):
        raise GrammarError(f"dependencies must be an object, got {value!r}")
    for name, dep in value.items():
        absent = {"properties": {name: False}}
        if isinstance(dep, list):
            present: dict = {"required": [name, *dep]}
        else:
            present = {"required": [name], "allOf": [dep]}
        f.any_of.append([c.keep(absent, ctx), c.keep(present, ctx)])


def _h_unevaluated(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if value is not True and value != {}:
        c.unsupported("unevaluatedProperties/unevaluatedItems",
                      "only the trivial value true is supported")


def _h_min_items(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.min_items = max(f.min_items, _count("minItems", value))


def _h_max_items(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    n = _count("maxItems", value)
    f.max_items = n if f.max_items is None else min(f.max_items, n)


def _h_contains(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    min_contains = schema.get("minContains", 1)
    if "maxContains" in schema:
        c.unsupported("maxContains", "counting matching items is not supported")
    if min_contains == 0:
        return
    if min_contains != 1:
        c.unsupported("minContains", "only minContains 0 or 1 is supported")
    f.contains.append((value, ctx))


def _h_unique_items(c: SchemaCompiler, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if value is True:
        f.unique = True


def _count(keyword: str, value: Any) -> int:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise GrammarError(f"{keyword} must be a non-negative integer, got {value!r}")
    return value


def _schema_list(keyword: str, value: Any) -> list[Any]:
    if not isinstance(value, list) or not value:
        raise GrammarError(f"{keyword} must be a non-empty array of schemas, got {value!r}")
    return value


_HANDLERS: dict[str, Callable[[SchemaCompiler, Facts, dict, Any, Ctx], None]] = {
    "type": _h_type, "enum": _h_enum, "const": _h_const, "allOf": _h_all_of,
    "anyOf": _h_any_of, "oneOf": _h_one_of, "not": _h_not, "if": _h_if,
    "minLength": _h_min_length, "maxLength": _h_max_length, "pattern": _h_pattern,
    "format": _h_format, "minimum": _h_minimum, "maximum": _h_maximum,
    "exclusiveMinimum": _h_exclusive_minimum, "exclusiveMaximum": _h_exclusive_maximum,
    "multipleOf": _h_multiple_of, "required": _h_required, "propertyNames": _h_property_names,
    "minProperties": _h_min_properties, "maxProperties": _h_max_properties,
    "dependencies": _h_dependent_required, "dependentRequired": _h_dependent_required,
    "dependentSchemas": _h_dependent_required, "unevaluatedProperties": _h_unevaluated,
    "unevaluatedItems": _h_unevaluated, "minItems": _h_min_items, "maxItems": _h_max_items,
    "contains": _h_contains, "uniqueItems": _h_unique_items,
}


# -- public API ------------------------------------------------------------------------------


def json_schema_to_node(schema: Any, options: JsonSchemaOptions | None = None,
                        deadline: Callable[[], None] | None = None
                        ) -> tuple[ra.Node, list[str]]:
    """(regex tree, notes) for a schema; notes list cut recursion and ignored annotations."""
    compiler = SchemaCompiler(schema, options or JsonSchemaOptions(), deadline)
    return compiler.compile(), compiler.notes


def json_schema_to_regex(schema: Any, whitespace: WhitespacePolicy | None = None,
                         lenient: bool = False, max_recursion_depth: int = 3,
                         max_chars: int | None = 50_000_000, **limits: Any) -> str:
    """Regex text (full-match semantics) for the JSON texts valid under ``schema``.

    ``limits`` are further :class:`JsonSchemaOptions` fields (``any_value_depth``,
    ``max_string_length``, ...). Raises :class:`GrammarError` naming any keyword that
    cannot be enforced (unless ``lenient``).
    """
    options = JsonSchemaOptions(whitespace=whitespace or WhitespacePolicy(), lenient=lenient,
                                max_recursion_depth=max_recursion_depth, **limits)
    node, _ = json_schema_to_node(schema, options)
    try:
        return ra.render(node, max_chars=max_chars)
    except ra.RenderTooLargeError as exc:
        raise GrammarError(str(exc)) from exc

