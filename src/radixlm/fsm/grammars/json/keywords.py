"""The keyword table: how each JSON Schema keyword folds into :class:`.facts.Facts`.

:func:`absorb` conjoins one sub-schema into a :class:`Facts`: booleans, ``$ref`` (through the
document, siblings ignored in drafts <= 7), then every keyword the document's draft defines,
through :data:`HANDLERS`; the keywords read as a group (``properties`` with
``patternProperties``/``additionalProperties``, ``items`` with ``prefixItems``/
``additionalItems``) are folded last, per source schema. Adding a keyword means a handler and
an entry here (and its kind in the keyword sets), plus the field it fills in :class:`Facts`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ...errors import GrammarError
from .context import FoldContext
from .facts import (
    JSON_TYPES,
    ArrayPart,
    Ctx,
    Facts,
    ObjectPart,
    SchemaShapeError,
    Sub,
    to_decimal,
)

# Keywords that never constrain an instance (annotations, containers of definitions).
ANNOTATIONS = frozenset({
    "title", "description", "default", "examples", "example", "$comment", "readOnly",
    "writeOnly", "deprecated", "contentEncoding", "contentMediaType", "contentSchema",
    "$schema", "$id", "id", "$anchor", "$dynamicAnchor", "$recursiveAnchor", "definitions",
    "$defs", "$vocabulary", "discriminator", "nullable", "xml", "externalDocs",
    "markdownDescription", "errorMessage", "deprecationMessage", "enumDescriptions",
    "then", "else",  # read together with "if"
})
STRING_KEYS = frozenset({"minLength", "maxLength", "pattern", "format"})
NUMBER_KEYS = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
                         "multipleOf"})
OBJECT_KEYS = frozenset({"properties", "required", "additionalProperties", "patternProperties",
                         "propertyNames", "minProperties", "maxProperties", "dependencies",
                         "dependentRequired", "dependentSchemas", "unevaluatedProperties"})
ARRAY_KEYS = frozenset({"items", "prefixItems", "additionalItems", "minItems", "maxItems",
                        "uniqueItems", "contains", "minContains", "maxContains",
                        "unevaluatedItems"})
LOGIC_KEYS = frozenset({"type", "enum", "const", "allOf", "anyOf", "oneOf", "not", "if",
                        "$ref", "$dynamicRef", "$recursiveRef"})
CONSTRAINING = STRING_KEYS | NUMBER_KEYS | OBJECT_KEYS | ARRAY_KEYS | LOGIC_KEYS


def facts_of(c: FoldContext, sub: Sub) -> Facts:
    """Facts of one sub-schema."""
    facts = Facts()
    absorb(c, facts, sub)
    return facts


def absorb(c: FoldContext, f: Facts, sub: Sub) -> None:
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
        inner = c.enter_ref(schema["$ref"], ctx)
        if inner is None:
            f.unsat = True
            return
        absorb(c, f, (c.document.resolve_ref(schema["$ref"]), inner))
        if c.document.legacy_ref:
            return  # drafts <= 7 ignore the siblings of $ref
    try:
        _absorb_keywords(c, f, schema, ctx)
    except SchemaShapeError as exc:
        raise GrammarError(f"invalid schema: {exc}") from exc


def _absorb_keywords(c: FoldContext, f: Facts, schema: dict, ctx: Ctx) -> None:
    for key, value in schema.items():
        if key in ANNOTATIONS or key == "$ref" or key not in c.document.keywords:
            continue  # keywords the draft does not define are annotations
        handler = HANDLERS.get(key)
        if handler is not None:
            handler(c, f, schema, value, ctx)
        elif key in ("$dynamicRef", "$recursiveRef"):
            c.unsupported(key, "dynamic references are not supported")
    _absorb_object(f, schema, ctx)
    _absorb_array(c, f, schema, ctx)


def _absorb_object(f: Facts, schema: dict, ctx: Ctx) -> None:
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


def _absorb_array(c: FoldContext, f: Facts, schema: dict, ctx: Ctx) -> None:
    items = schema.get("items", True)
    if "prefixItems" in schema and "prefixItems" in c.document.keywords:
        prefix = schema["prefixItems"]
        rest = items
    elif isinstance(items, list):
        if "additionalItems" not in c.document.keywords:
            c.unsupported("items", "the array form of items is not part of this draft "
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


# -- keyword handlers -----------------------------------------------------------------------


def _h_type(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or any(n not in JSON_TYPES for n in names):
        raise GrammarError(f"type must be a JSON type name or a list of them, got {value!r}")
    f.restrict_types(frozenset(names))


def _h_enum(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if not isinstance(value, list):
        raise GrammarError(f"enum must be an array, got {value!r}")
    if f.enum is None:
        f.enum = list(value)  # the other sources filter it (valid_in)


def _h_const(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if f.enum is None:
        f.enum = [value]


def _h_all_of(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    for sub in _schema_list("allOf", value):
        absorb(c, f, (sub, ctx))


def _h_any_of(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.any_of.append([(s, ctx) for s in _schema_list("anyOf", value)])


def _h_one_of(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.one_of.append([(s, ctx) for s in _schema_list("oneOf", value)])


def _h_not(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.nots.append((value, ctx))


def _h_if(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    then, else_ = schema.get("then", True), schema.get("else", True)
    if then is True and else_ is True:
        return
    f.any_of.append([c.keep({"allOf": [value, then]}, ctx),
                     c.keep({"allOf": [{"not": value}, else_]}, ctx)])


def _h_min_length(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.min_len = max(f.min_len, _count("minLength", value))


def _h_max_length(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    n = _count("maxLength", value)
    f.max_len = n if f.max_len is None else min(f.max_len, n)


def _h_pattern(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if not isinstance(value, str):
        raise GrammarError(f"pattern must be a string, got {value!r}")
    f.patterns.append(value)


def _h_format(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if isinstance(value, str) and value not in f.formats:
        f.formats.append(value)


def _h_minimum(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    strict = c.document.boolean_exclusive and schema.get("exclusiveMinimum") is True
    f.tighten_lo(to_decimal(value, "minimum"), strict)


def _h_maximum(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    strict = c.document.boolean_exclusive and schema.get("exclusiveMaximum") is True
    f.tighten_hi(to_decimal(value, "maximum"), strict)


def _h_exclusive_minimum(c: FoldContext, f: Facts, schema: dict, value: Any,
                         ctx: Ctx) -> None:
    if not c.document.boolean_exclusive:
        f.tighten_lo(to_decimal(value, "exclusiveMinimum"), True)


def _h_exclusive_maximum(c: FoldContext, f: Facts, schema: dict, value: Any,
                         ctx: Ctx) -> None:
    if not c.document.boolean_exclusive:
        f.tighten_hi(to_decimal(value, "exclusiveMaximum"), True)


def _h_multiple_of(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    k = to_decimal(value, "multipleOf")
    if k <= 0:
        raise GrammarError(f"multipleOf must be > 0, got {value!r}")
    f.multiples.append(k)


def _h_required(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if not isinstance(value, list) or not all(isinstance(n, str) for n in value):
        raise GrammarError(f"required must be an array of strings, got {value!r}")
    f.add_required(value)


def _h_property_names(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.property_names.append((value, ctx))


def _h_min_properties(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.min_props = max(f.min_props, _count("minProperties", value))


def _h_max_properties(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    n = _count("maxProperties", value)
    f.max_props = n if f.max_props is None else min(f.max_props, n)


def _h_dependent_required(c: FoldContext, f: Facts, schema: dict, value: Any,
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


def _h_unevaluated(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    if value is not True and value != {}:
        c.unsupported("unevaluatedProperties/unevaluatedItems",
                      "only the trivial value true is supported")


def _h_min_items(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    f.min_items = max(f.min_items, _count("minItems", value))


def _h_max_items(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    n = _count("maxItems", value)
    f.max_items = n if f.max_items is None else min(f.max_items, n)


def _h_contains(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
    min_contains = schema.get("minContains", 1)
    if "maxContains" in schema:
        c.unsupported("maxContains", "counting matching items is not supported")
    if min_contains == 0:
        return
    if min_contains != 1:
        c.unsupported("minContains", "only minContains 0 or 1 is supported")
    f.contains.append((value, ctx))


def _h_unique_items(c: FoldContext, f: Facts, schema: dict, value: Any, ctx: Ctx) -> None:
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


Handler = Callable[[FoldContext, Facts, dict, Any, Ctx], None]

# keyword -> its handler. Not listed: the grouped object/array keywords (folded by
# _absorb_object/_absorb_array), those read by a sibling's handler (then/else, min/maxContains)
# and the dynamic references (refused by name in _absorb_keywords).
HANDLERS: dict[str, Handler] = {
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
