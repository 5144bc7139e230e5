"""``not`` and ``oneOf`` exclusivity, for the forms that reduce to positive facts.

:func:`apply_not` rewrites ``not: N`` into facts (types removed, values or patterns excluded,
an ``anyOf`` of "property absent" branches, ranges complemented) or refuses it by name.
:func:`provably_disjoint` proves two ``oneOf`` branches share no instance (different types,
disjoint ranges, enum values outside the other branch, a required property with disjoint
values); only then is ``oneOf`` compiled as an alternation.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from ...errors import GrammarError
from .context import SchemaContext
from .facts import ALL_TYPES, ArrayPart, Facts, Sub, expand_types, to_decimal
from .keywords import CONSTRAINING, NUMBER_KEYS, absorb, facts_of
from .property_schemas import value_sub


def _types_of(value: Any) -> frozenset[str]:
    return frozenset([value] if isinstance(value, str) else value)


def apply_not(c: SchemaContext, f: Facts, sub: Sub) -> None:
    """Conjoin ``not: schema`` into ``f`` (or report it unsupported)."""
    n, ctx = sub
    if n is True:
        f.unsat = True
        return
    if n is False:
        return
    if not isinstance(n, dict):
        raise GrammarError(f"not must be a schema, got {n!r}")
    keys = frozenset(n) & CONSTRAINING & c.document.keywords  # others: annotations
    if not keys:
        f.unsat = True  # N accepts everything
    elif keys == {"$ref"}:
        inner = c.enter_ref(n["$ref"], ctx)
        if inner is None:
            c.unsupported("not", "negating a recursion-limited reference would be unsound")
        else:
            apply_not(c, f, (c.document.resolve_ref(n["$ref"]), inner))
    elif keys == {"not"}:
        absorb(c, f, (n["not"], ctx))
    elif keys == {"anyOf"}:
        f.nots.extend((s, ctx) for s in n["anyOf"])
    elif keys == {"allOf"}:
        f.any_of.append([c.keep({"not": s}, ctx) for s in n["allOf"]])
    elif keys == {"type"}:
        f.remove_types(_types_of(n["type"]))
    elif keys <= {"enum", "const", "type"}:
        _exclude_values(c, f, n)
    elif keys <= {"properties", "required", "type"} and n.get("type", "object") == "object":
        _not_object(c, f, n, ctx)
    elif keys <= {"pattern", "type"} and n.get("type", "string") == "string":
        if "type" not in keys:
            f.restrict_types(frozenset({"string"}))
        f.not_patterns.append(n["pattern"])
    elif keys <= NUMBER_KEYS - {"multipleOf"} and "type" not in n:
        _not_range(c, f, n, ctx)
    elif keys == {"multipleOf"} and _positive_divisor(n["multipleOf"]):
        f.restrict_types(frozenset({"number"}))
        f.not_multiples.append(to_decimal(n["multipleOf"], "multipleOf"))
    elif "$ref" in keys and c.document.legacy_ref:
        # drafts <= 7: $ref overrides its siblings, so N is its target alone
        apply_not(c, f, c.keep({"$ref": n["$ref"]}, ctx))
    elif keys == {"oneOf"}:
        _not_one_of(c, f, n, ctx)
    elif "if" in keys and keys <= {"if", "then", "else"}:
        _not_if(c, f, n, keys, ctx)
    elif keys in ({"dependencies"}, {"dependentRequired"}, {"dependentSchemas"}):
        _not_dependencies(c, f, n, ctx)
    elif keys == {"propertyNames"}:
        _not_property_names(c, f, n, ctx)
    elif keys <= _MEMBER_KEYS and keys & {"patternProperties", "additionalProperties"}:
        _not_members(c, f, n, ctx)
    elif len(keys) == 1 and next(iter(keys)) in _SINGLE:
        _SINGLE[next(iter(keys))](c, f, n, ctx)
    elif len(groups := _independent_groups(c, n, keys)) > 1:
        # De Morgan: not (A and B) = not A or not B, for keyword groups that are read
        # independently of each other
        f.any_of.append([c.keep({"not": g}, ctx) for g in groups])
    else:
        c.unsupported("not", f"cannot enforce not with keywords {sorted(keys)}")


# keywords whose meaning depends on siblings: negated together, never split apart
_COUPLED = (
    frozenset({"properties", "patternProperties", "additionalProperties"}),
    frozenset({"items", "prefixItems", "additionalItems"}),
    frozenset({"contains", "minContains", "maxContains"}),
    frozenset({"unevaluatedProperties", "unevaluatedItems"}),
)
_CARRIED = {"if": ("then", "else")}  # read with their keyword, not constraining on their own


def _independent_groups(c: SchemaContext, n: dict, keys: frozenset[str]) -> list[dict]:
    """Split N's keywords into groups that constrain independently (their conjunction is N)."""
    if "$ref" in keys and c.document.legacy_ref:
        return []  # drafts <= 7: $ref overrides its siblings (handled as a plain $ref)
    coupled = list(_COUPLED)
    if c.document.boolean_exclusive:  # draft 4: exclusive* are flags on minimum/maximum
        coupled += [frozenset({"minimum", "exclusiveMinimum"}),
                    frozenset({"maximum", "exclusiveMaximum"})]
    groups: list[set[str]] = []
    for key in sorted(keys):
        group = next((g for g in coupled if key in g), frozenset({key}))
        found = next((g for g in groups if g & group), None)
        if found is None:
            groups.append(set(group & keys))
        else:
            found |= group & keys
    out = []
    for group in groups:
        picked = {k: n[k] for k in sorted(group)}
        for k in group:
            picked.update({extra: n[extra] for extra in _CARRIED.get(k, ()) if extra in n})
        out.append(picked)
    return out


def _not_items(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not {items: S} = an array with some item outside S (``contains: {not: S}``).

    The item that is not an S is merged with the array's own item schema at the schema
    level (:func:`arrays._with_contains`), so even container items give one item grammar,
    not a product of two.
    """
    items = n["items"]
    if isinstance(items, list):
        c.unsupported("not", "negating the array form of items")
        return
    f.restrict_types(frozenset({"array"}))
    f.contains.append(c.keep({"not": items}, ctx))


def _not_contains(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not {contains: S} = an array none of whose items is an S (every non-array satisfies
    N; so does the empty array, which has no item that is an S)."""
    f.restrict_types(frozenset({"array"}))
    f.arrays.append(ArrayPart([], c.keep({"not": n["contains"]}, ctx)))


def _not_count(kind: str, low: str, high: str) -> Callable[..., None]:
    """not {low: k} = kind with high k-1; not {high: k} = kind with low k+1 (counts of
    characters, items or properties; every other type satisfies N)."""

    def negate(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
        key = low if low in n else high  # N's only constraining keyword (others annotate)
        value = n[key]
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise GrammarError(f"{key} must be a non-negative integer, got {value!r}")
        f.restrict_types(frozenset({kind}))
        if key == low and value == 0:
            f.unsat = True
            return
        bound = {high: value - 1} if key == low else {low: value + 1}
        absorb(c, f, c.keep({"type": kind, **bound}, ctx))

    return negate


def _not_format(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not {format: F} = a string F's checker rejects (formats the draft does not check are
    annotations: N then accepts everything)."""
    name = n["format"]
    if name not in c.document.checked_formats:
        f.unsat = True
        return
    f.restrict_types(frozenset({"string"}))
    f.not_formats.append(name)


_SINGLE: dict[str, Callable[..., None]] = {
    "items": _not_items,
    "contains": _not_contains,
    "minItems": _not_count("array", "minItems", "maxItems"),
    "maxItems": _not_count("array", "minItems", "maxItems"),
    "minLength": _not_count("string", "minLength", "maxLength"),
    "maxLength": _not_count("string", "minLength", "maxLength"),
    "minProperties": _not_count("object", "minProperties", "maxProperties"),
    "maxProperties": _not_count("object", "minProperties", "maxProperties"),
    "format": _not_format,
}


def _positive_divisor(value: Any) -> bool:
    """A multipleOf value whose multiples the number builders spell exactly (any positive
    finite decimal: last digits or a residue automaton)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and \
        math.isfinite(value) and value > 0


def _exclude_values(c: SchemaContext, f: Facts, n: dict) -> None:
    values = list(n.get("enum", []))
    if "const" in n:
        values = [n["const"]] if "enum" not in n else [v for v in values if v == n["const"]]
    f.not_values.extend(v for v in values if c.document.valid_in(v, [n]))


def _not_object(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not {properties: P, required: R} = some p in P present with a value outside P[p], or
    some r in R absent (or, when N says type object, not an object at all)."""
    props = n.get("properties", {})
    branches = [c.keep({"properties": {p: {"not": s}}, "required": [p]}, ctx)
                for p, s in props.items()]
    branches += [c.keep({"properties": {r: False}}, ctx) for r in n.get("required", [])]
    if "type" in n:
        branches.append(c.keep({"type": sorted(ALL_TYPES - {"object"})}, ctx))
    else:
        f.restrict_types(frozenset({"object"}))  # N accepts every non-object
    if not branches:
        f.unsat = True
    else:
        f.any_of.append(branches)


def _not_one_of(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not oneOf [B1..Bn] = no branch holds, or two of them do."""
    branches = n["oneOf"]
    if not isinstance(branches, list) or not branches:
        raise GrammarError(f"oneOf must be a non-empty array of schemas, got {branches!r}")
    options = [c.keep({"not": {"anyOf": branches}}, ctx)]
    options += [c.keep({"allOf": [a, b]}, ctx)
                for i, a in enumerate(branches) for b in branches[i + 1:]]
    f.any_of.append(options)


def _not_if(c: SchemaContext, f: Facts, n: dict, keys: frozenset[str], ctx: Any) -> None:
    """not (if A then B else C) = (A and not B) or (not A and not C); a missing then or
    else holds for every instance, so its side drops out."""
    options = []
    keys = keys | (frozenset(n) & {"then", "else"})  # read with if (the draft has if)
    if "then" in keys:
        options.append(c.keep({"allOf": [n["if"], {"not": n["then"]}]}, ctx))
    if "else" in keys:
        options.append(c.keep({"allOf": [{"not": n["if"]}, {"not": n["else"]}]}, ctx))
    if not options:
        f.unsat = True  # if alone constrains nothing: N accepts everything
    else:
        f.any_of.append(options)


def _not_dependencies(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not dependencies {p: D} = an object with some p present that fails D (a list of
    names: one of them absent; a schema: the object is not a D)."""
    (key,) = n.keys() & CONSTRAINING
    deps = n[key]
    if not isinstance(deps, dict):
        raise GrammarError(f"{key} must be an object, got {deps!r}")
    f.restrict_types(frozenset({"object"}))
    options = []
    for name, dep in deps.items():
        failed = {"not": {"required": dep}} if isinstance(dep, list) else {"not": dep}
        options.append(c.keep({"required": [name], **failed}, ctx))
    if not options:
        f.unsat = True
    else:
        f.any_of.append(options)


_MEMBER_KEYS = frozenset({"properties", "patternProperties", "additionalProperties"})


def _not_property_names(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not {propertyNames: S} = an object with some key outside S."""
    f.restrict_types(frozenset({"object"}))
    key = c.keep({"type": "string", "not": n["propertyNames"]}, ctx)
    f.some_members.append((key, (True, ())))


def _not_members(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not {properties: P, patternProperties: Q, additionalProperties: A} = an object with a
    member that violates one of them: a declared key with a value outside P[p], a key
    matching a pattern q with a value outside Q[q], or a key neither declared nor matching a
    pattern with a value outside A (every non-object satisfies N)."""
    props = n.get("properties", {})
    pats = n.get("patternProperties", {})
    add = n.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(pats, dict):
        raise GrammarError("properties and patternProperties must be objects")
    branches: list[Sub] = [c.keep({"properties": {p: {"not": s}}, "required": [p]}, ctx)
                           for p, s in props.items() if s is not True]
    members: list[tuple[Sub, Sub]] = []
    for pattern, s in pats.items():
        if s is not True:
            members.append((c.keep({"type": "string", "pattern": pattern}, ctx),
                            (True, ()) if s is False else c.keep({"not": s}, ctx)))
    if add is not True:
        known = [{"pattern": p} for p in pats] + ([{"enum": list(props)}] if props else [])
        key = {"type": "string", "not": {"anyOf": known}} if known else {"type": "string"}
        members.append((c.keep(key, ctx),
                        (True, ()) if add is False else c.keep({"not": add}, ctx)))
    f.restrict_types(frozenset({"object"}))
    if not branches and len(members) == 1:
        f.some_members.append(members[0])
        return
    # one violation per branch; each member branch is the negation of one keyword alone (a
    # real schema, so enum values are still checked by jsonschema against it)
    branches += [c.keep({"not": {"patternProperties": {p: s}}}, ctx)
                 for p, s in pats.items() if s is not True]
    if add is not True:
        branches.append(c.keep({"not": {"properties": {p: True for p in props},
                                        "patternProperties": {p: True for p in pats},
                                        "additionalProperties": add}}, ctx))
    if not branches:
        f.unsat = True
    else:
        f.any_of.append(branches)


def _not_range(c: SchemaContext, f: Facts, n: dict, ctx: Any) -> None:
    """not (lo <= x <= hi) = x < lo or x > hi, for numbers (N accepts every non-number)."""
    nf = facts_of(c, (n, ctx))
    f.restrict_types(frozenset({"number"}))
    bound = c.document.bound_schema
    branches = []
    if nf.lo is not None:
        branches.append(c.keep(bound("max", nf.lo, inclusive=nf.lo_strict), ctx))
    if nf.hi is not None:
        branches.append(c.keep(bound("min", nf.hi, inclusive=nf.hi_strict), ctx))
    if not branches:
        f.unsat = True
        return
    f.any_of.append(branches)


# -- disjointness ----------------------------------------------------------------------------


def provably_disjoint(c: SchemaContext, a: Facts, b: Facts,
                      branches: tuple[Any, Any] | None = None) -> bool:
    """True only when no instance satisfies both ``a`` and ``b``.

    ``branches``: the two ``oneOf`` branch schemas ``a`` and ``b`` were built from (each with
    the facts around the ``oneOf``). Enum values are then checked against the branches
    alone: the facts' sources include the schema holding the ``oneOf`` itself, which no
    value in both branches satisfies, so checking them would "prove" every overlap empty.
    """
    if a.unsat or b.unsat:
        return True
    valid_in = c.document.valid_in
    for x, y in ((a, b), (b, a)):
        if x.enum is not None:
            if branches is not None:
                return not any(valid_in(v, list(branches)) for v in x.enum)
            return not any(valid_in(v, x.sources) and valid_in(v, y.sources) for v in x.enum)
    shared = expand_types(a.types) & expand_types(b.types)
    if "number" in shared:
        shared -= {"integer"}
    for t in shared:
        if t == "object" and _objects_disjoint(c, a, b):
            continue
        if t in ("number", "integer") and _ranges_disjoint(a, b):
            continue
        return False
    return True


def _ranges_disjoint(a: Facts, b: Facts) -> bool:
    for x, y in ((a, b), (b, a)):
        if x.hi is not None and y.lo is not None:
            if x.hi < y.lo or (x.hi == y.lo and (x.hi_strict or y.lo_strict)):
                return True
    return False


def _objects_disjoint(c: SchemaContext, a: Facts, b: Facts) -> bool:
    if a.max_props is not None and b.min_props > a.max_props:
        return True
    if b.max_props is not None and a.min_props > b.max_props:
        return True
    for x, y in ((a, b), (b, a)):
        for name in x.required:
            y_sub = value_sub(c, y, name)
            if y_sub[0] is False:
                return True
            x_sub = value_sub(c, x, name)
            if provably_disjoint(c, facts_of(c, x_sub), facts_of(c, y_sub)):
                return True
    return False

