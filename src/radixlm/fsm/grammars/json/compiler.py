"""Compiling :class:`.facts.Facts` into regex trees (see the package docstring for semantics).

:class:`SchemaCompiler` walks one :class:`.document.SchemaDocument`: each sub-schema's keywords
are folded into facts (:mod:`.keywords`), combinators are distributed (``anyOf``, exact
``oneOf``, ``not`` through :mod:`.negation`), and each allowed type is built by its builder
(:mod:`.objects`, :mod:`.arrays`, :mod:`.numbers`, strings and literals here). Results are
memoised per (sub-schema, recursion context), so shared sub-schemas stay shared trees.
"""

from __future__ import annotations

import json
import warnings
from collections.abc import Callable
from typing import Any

from ...errors import GrammarBudgetError, GrammarError
from ...regex import tree as ra
from ..whitespace import WhitespacePolicy
from . import keywords
from .arrays import array_node
from .document import SchemaDocument
from .facts import Ctx, Facts, Sub, expand_types, json_type_of
from .formats import SUPPORTED_FORMATS, format_node
from .lookaheads import negated_pattern, pattern_parts
from .negation import apply_not, provably_disjoint
from .numbers import number_node
from .objects import object_node
from .options import JsonSchemaOptions
from .strings import StringEncoder, quoted, string_content

_ANY_VALUE: dict[tuple, ra.Node] = {}  # free-form value trees, shared across compilers


class SchemaCompiler:
    """Compiles one schema document; see the package docstring for the semantics.

    Implements :class:`.context.SchemaContext`, the interface the keyword handlers and the
    per-type builders are written against.
    """

    def __init__(self, schema: Any, options: JsonSchemaOptions,
                 deadline: Callable[[], None] | None = None) -> None:
        self.document = SchemaDocument(schema)
        self.options = options
        self.check_deadline = deadline or (lambda: None)
        self.ws = options.whitespace.node()
        self.encoder = StringEncoder()
        self.notes: list[str] = []
        self._memo: dict[tuple[int, Ctx], ra.Node] = {}
        self._synthetic: dict[tuple, dict] = {}
        self._keep: list[Any] = []
        self._expansions = 0
        self._strict = 0  # > 0: refuse even under lenient (an exact rewrite is being tried)
        self._pattern_builder = None

    # -- entry ------------------------------------------------------------------------------

    def compile(self) -> ra.Node:
        """The regex tree of the whole document."""
        node = self.compile_sub((self.document.root, ()))
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

    def enter_ref(self, ref: str, ctx: Ctx) -> Ctx | None:
        """The context inside ``ref``; None (and a note) when the recursion limit cuts it."""
        inner = self.document.enter_ref(ref, ctx, self.options.max_recursion_depth)
        if inner is None:
            self.notes.append(f"recursion through $ref {ref!r} cut at depth "
                              f"{self.options.max_recursion_depth}")
        return inner

    # -- folding keywords (the keyword table lives in .keywords) ------------------------------

    def facts_of(self, sub: Sub) -> Facts:
        """Facts of one sub-schema."""
        return keywords.facts_of(self, sub)

    def absorb(self, f: Facts, sub: Sub) -> None:
        """Conjoin ``sub`` into ``f``."""
        keywords.absorb(self, f, sub)

    # -- compiling ----------------------------------------------------------------------------

    def compile_sub(self, sub: Sub) -> ra.Node:
        """Regex tree of the JSON values matching a sub-schema (memoised)."""
        schema, ctx = sub
        if schema is True or (isinstance(schema, dict)
                              and not (schema.keys() & keywords.CONSTRAINING)):
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

    def _check_distribution(self, f: Facts) -> None:
        """Fail fast: distributing the pending groups yields up to the product of their sizes
        in combinations, each compiled; refuse before expanding any when that product would
        exceed what is left of the expansion budget (an upper bound: branches that turn out
        unsatisfiable are pruned while distributing, but are counted here)."""
        estimate = 1
        left = self.options.max_expansions - self._expansions
        for group in f.any_of + f.one_of:
            estimate *= len(group)
            if estimate > left:
                raise GrammarBudgetError(
                    "schema expansion", self.options.max_expansions,
                    f"distributing {len(f.any_of) + len(f.one_of)} anyOf/oneOf/if groups here "
                    f"needs up to {estimate}+ combinations, {left} left")

    def compile_facts(self, f: Facts) -> ra.Node:
        """Regex tree of the values satisfying every fact in ``f``."""
        self._count_expansion()
        if f.unsat:
            return ra.EMPTY
        if f.enum is not None:
            valid = self.document.valid_in
            return ra.alt(*(self.literal(v) for v in f.enum if valid(v, f.sources)))
        if f.nots:
            rest = f.copy()
            negated = rest.nots.pop(0)
            apply_not(self, rest, negated)
            return self.compile_facts(rest)
        if f.any_of or f.one_of:
            self._check_distribution(f)
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
                if isinstance(exc, GrammarBudgetError) and exc.budget in _WHOLE_COMPILE:
                    raise  # the whole compile is out of budget: not a verdict on this oneOf
                self.unsupported("oneOf", f"branches may overlap and exclusivity cannot be "
                                          f"enforced ({exc}); treated as anyOf")
        return ra.alt(*(self.compile_facts(g) for _, g in branches))

    def _exclusive_branches(self, branches: list[tuple[Sub, Facts]]) -> list[ra.Node]:
        overlaps = [[j for j, (sb, b) in enumerate(branches)
                     if j != i and not provably_disjoint(self, a, b, (sa[0], sb[0]))]
                    for i, (sa, a) in enumerate(branches)]
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
        parts = [pattern_parts(p) for p in f.patterns]
        decoded = [node for part in parts for node in part.require]
        decoded += self.string_format_nodes(f.formats)
        max_len = f.max_len
        cap = self.options.max_string_length
        if cap is not None and not decoded:  # patterns and formats keep their own shape
            max_len = max(f.min_len, cap if max_len is None else min(max_len, cap))
        forbid = [ra.lit(v) for v in self._excluded(f, "string")]
        forbid += [node for part in parts for node in part.forbid]
        forbid += [node for p in f.not_patterns for node in negated_pattern(self, p)]
        forbid += self.string_format_nodes(f.not_formats)
        content = string_content(self.encoder, f.min_len, max_len, decoded, forbid)
        return quoted(content) if content is not ra.EMPTY else ra.EMPTY

    def string_format_nodes(self, formats: list[str]) -> list[ra.Node]:
        """Decoded-string regexes of the formats (unknown formats are annotations)."""
        out = []
        for name in formats:
            if name not in self.document.checked_formats:
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
            if not self.document.integer_fraction:  # draft 4: 1.0 is not an integer
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
        from ...automaton.derivatives import TermBuilder

        if self._pattern_builder is None:
            self._pattern_builder = TermBuilder()
        builder, data = self._pattern_builder, text.encode("utf-8")
        parts = pattern_parts(pattern)
        return all(builder.matches(builder.lower(n), data) for n in parts.require) and \
            not any(builder.matches(builder.lower(n), data) for n in parts.forbid)


# budgets of the whole compile (its deadline): running out of one inside a oneOf's
# exclusivity check refuses the compile; only that check's own limits make oneOf unsupported
# (else the verdict would depend on how fast the machine got there)
_WHOLE_COMPILE = ("time", "compile steps")


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

