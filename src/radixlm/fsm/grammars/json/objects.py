"""Objects of a schema: declared properties in order, then additional/pattern properties.

Layout: ``{`` ws member (ws ``,`` ws member)* ws ``}`` with declared properties first, in
schema order (required ones mandatory, optional ones skippable), then additional members whose
keys can never equal a declared name. ``min/maxProperties`` are counted exactly. The regex is
built as a DAG over (position, count, anything-emitted-yet), so optional properties cost
linear size, not exponential.
"""

from __future__ import annotations

from ...regex import tree as ra
from .context import SchemaContext
from .facts import Facts, ObjectPart
from .keywords import facts_of
from .literal_patterns import with_literal_patterns_as_properties
from .lookaheads import negated_pattern, pattern_parts
from .negation import apply_not
from .property_schemas import value_sub
from .strings import ANY_CHAR, quoted, string_content

MAX_PATTERN_PROPERTIES = 6
_ANY_TEXT = ra.star(ANY_CHAR)


class _ObjectBuilder:
    def __init__(self, c: SchemaContext, f: Facts) -> None:
        self.c = c
        self.f = f
        self.parts = [with_literal_patterns_as_properties(p, c.merge_subs)
                      for p in f.objects] or [ObjectPart({}, [], None)]
        self.names_facts = self._property_name_facts()

    def _property_name_facts(self) -> Facts | None:
        if not self.f.property_names:
            return None
        facts = facts_of(self.c, self.c.merge_subs(list(self.f.property_names)))
        while facts.nots and not facts.unsat:
            apply_not(self.c, facts, facts.nots.pop(0))
        return facts

    def declared_names(self) -> list[str]:
        names: list[str] = []
        for part in self.parts:
            names.extend(n for n in part.properties if n not in names)
        names.extend(n for n in self.f.required if n not in names)
        return names

    def name_allowed(self, name: str) -> bool:
        subs = [s for s, _ in self.f.property_names]
        return not subs or self.c.document.valid_in(name, subs)

    def member(self, key: ra.Node, value: ra.Node) -> ra.Node:
        ws = self.c.ws
        return ra.seq(key, ws, ra.lit(":"), ws, value)

    def key_node(self, require: list[str], forbid: list[str], declared: list[str]) -> ra.Node:
        """Quoted key: satisfies propertyNames and the required patterns, none of the
        forbidden patterns, and is not a declared name."""
        nf, c = self.names_facts, self.c
        decoded: list[ra.Node] = []
        banned: list[ra.Node] = []
        min_len, max_len = 0, None
        wanted = list(require)
        names_node = None
        if nf is not None and (nf.any_of or nf.one_of or nf.not_formats):
            # propertyNames with anyOf/oneOf/not format: the names are the strings of that
            # schema, compiled as a JSON string (a key is spelled like one) and intersected
            names_node = c.compile_sub(c.merge_subs(
                [*self.f.property_names, c.keep({"type": "string"}, ())]))
            nf = None
        if nf is not None:
            if nf.unsat or "string" not in nf.effective_types():
                return ra.EMPTY
            if nf.enum is not None:
                names = [v for v in nf.enum if isinstance(v, str) and self.name_allowed(v)]
                decoded.append(ra.alt(*(ra.lit(v) for v in names)))
            wanted += nf.patterns
            decoded += c.string_format_nodes(nf.formats)
            min_len, max_len = nf.min_len, nf.max_len
            forbid = forbid + nf.not_patterns
            declared = declared + [v for v in nf.not_values if isinstance(v, str)]
        for part in map(pattern_parts, wanted):
            decoded += part.require
            banned += part.forbid
        cap = c.options.max_string_length
        if cap is not None:
            max_len = max(min_len, cap if max_len is None else min(max_len, cap))
        banned += [node for p in forbid for node in negated_pattern(c, p)]
        if declared:
            banned.append(ra.alt(*(ra.lit(n) for n in declared)))
        content = string_content(self.c.encoder, min_len, max_len, decoded, banned)
        key = quoted(content) if content is not ra.EMPTY else ra.EMPTY
        if names_node is None or key is ra.EMPTY:
            return key
        # both are whole JSON strings, which end at their closing quote: no terminator
        return ra.constrained(key, [names_node], terminator="")

    def extras(self, declared: list[str]) -> ra.Node:
        """Alternation of the possible additional members (EMPTY when none are allowed).

        Keys are split by which patterns (of every merged part) they match: for each subset
        of the distinct patterns, a key matching exactly those gets, per part, the schemas of
        its matching patterns, or that part's ``additionalProperties`` when none match."""
        c = self.c
        patterns: list[str] = []
        for part in self.parts:
            patterns.extend(p for p, _ in part.patterns if p not in patterns)
        if len(patterns) > MAX_PATTERN_PROPERTIES:
            c.unsupported("patternProperties", f"more than {MAX_PATTERN_PROPERTIES} patterns "
                                               "for additional keys")
            patterns = patterns[:MAX_PATTERN_PROPERTIES]
        options = []
        for mask in range(1 << len(patterns)):
            inside = {patterns[i] for i in range(len(patterns)) if mask >> i & 1}
            subs: list = []
            for part in self.parts:
                hits = [sub for p, sub in part.patterns if p in inside]
                subs.extend(hits if hits else [part.additional])
            value = c.compile_sub(c.merge_subs(subs))
            if value is ra.EMPTY:
                continue
            key = self.key_node(sorted(inside), [p for p in patterns if p not in inside],
                                declared)
            if key is not ra.EMPTY:
                options.append(self.member(key, value))
        return ra.alt(*options)

    def build(self) -> ra.Node:
        c, f = self.c, self.f
        members: list[tuple[ra.Node, bool]] = []
        names = self.declared_names()
        for name in names:
            required = name in f.required
            value = ra.EMPTY
            if self.name_allowed(name):
                value = c.compile_sub(value_sub(c, self._facts_for_parts(), name))
            if value is ra.EMPTY:
                if required:
                    return ra.EMPTY
                continue
            members.append((self.member(quoted(c.encoder.literal(name)), value), required))
        extra = self.extras(names)
        required_count = sum(1 for _, req in members if req)
        if extra is not ra.EMPTY and f.min_props - required_count >= 2:
            # a repeated additional key counts once in the parsed object, and "all keys
            # distinct" is not regular: only one additional key may be needed for the minimum
            c.unsupported("minProperties", "a minimum that needs two or more additional "
                                           "properties (their keys could repeat)")
        node = _layout(c, members, extra, f.min_props, f.max_props,
                       c.options.max_object_properties)
        if f.some_members and node is not ra.EMPTY:
            node = self._with_some_members(node, ra.alt(*(m for m, _ in members), extra))
        return node

    def _with_some_members(self, node: ra.Node, member: ra.Node) -> ra.Node:
        """``node`` ∩ objects with, for each (key, value) fact, some member whose key and
        value satisfy it. ``member`` is any member of ``node``; JSON values hold no top-level
        comma, so a member list splits one way only and the intersection is exact."""
        c = self.c
        ws, sep = c.ws, c.separator()
        require = []
        for key_sub, val_sub in self.f.some_members:
            key = c.compile_sub(key_sub)
            # any value: the member already spells one, so only its key is checked (a second
            # free-form value grammar run in parallel would multiply the states)
            value = _ANY_TEXT if val_sub[0] is True else c.compile_sub(val_sub)
            wanted = ra.seq(key, ws, ra.lit(":"), ws, value)
            # a member ends before whitespace and "," or "}" (a number is not self-delimiting)
            hit = ra.constrained(member, [wanted], terminator=r"[ \t\n\r]*[,}]")
            if hit is ra.EMPTY:
                return ra.EMPTY
            require.append(ra.seq(ra.lit("{"), ws, ra.star(ra.seq(member, sep)), hit,
                                  ra.star(ra.seq(sep, member)), ws, ra.lit("}")))
        # objects are self-delimiting: an empty terminator pins the lookahead to the end
        return ra.constrained(node, require, terminator="")

    def _facts_for_parts(self) -> Facts:
        view = Facts()
        view.objects = self.parts
        return view


def _layout(c: SchemaContext, members: list[tuple[ra.Node, bool]], extra: ra.Node,
            min_props: int, max_props: int | None, extra_cap: int | None) -> ra.Node:
    """``{ ... }`` around the members (in order; optional ones skippable) and the extras."""
    required_count = sum(1 for _, req in members if req)
    if max_props is not None and required_count > max_props:
        return ra.EMPTY
    if max_props is None and min_props <= required_count:
        body = _flat_body(c, members, extra, extra_cap)
    else:
        body = _counted_body(c, members, extra, min_props, max_props, extra_cap)
    ws = c.ws
    options = []
    if required_count == 0 and min_props == 0:
        options.append(ra.seq(ra.lit("{"), ws, ra.lit("}")))
    if body is not ra.EMPTY:
        options.append(ra.seq(ra.lit("{"), ws, body, ws, ra.lit("}")))
    return ra.alt(*options)


def _flat_body(c: SchemaContext, members: list[tuple[ra.Node, bool]], extra: ra.Node,
               extra_cap: int | None) -> ra.Node:
    """Non-empty member list without counting: an alternation over the first member present,
    each followed by a flat sequence (no nesting, whatever the number of properties)."""
    sep = c.separator()
    tail_extras = ra.EPSILON if extra is ra.EMPTY else \
        ra.repeat(ra.seq(sep, extra), 0, extra_cap)
    followers = [ra.seq(sep, m) if req else ra.opt(ra.seq(sep, m)) for m, req in members]
    options = []
    for j, (member, required) in enumerate(members):
        options.append(ra.seq(member, *followers[j + 1:], tail_extras))
        if required:
            return ra.alt(*options)
    if extra is not ra.EMPTY and extra_cap != 0:
        more = None if extra_cap is None else extra_cap - 1
        options.append(ra.seq(extra, ra.repeat(ra.seq(sep, extra), 0, more)))
    return ra.alt(*options)


def _counted_body(c: SchemaContext, members: list[tuple[ra.Node, bool]], extra: ra.Node,
                  min_props: int, max_props: int | None, extra_cap: int | None) -> ra.Node:
    """Non-empty member list with min/maxProperties: a DAG over (position, count, started)."""
    n = len(members)
    sep = c.separator()
    memo: dict[tuple[int, int, bool], ra.Node] = {}

    def tail_extras(count: int, started: bool) -> ra.Node:
        k_lo = max(0, min_props - count)
        k_hi = None if max_props is None else max_props - count
        if extra_cap is not None:
            k_hi = extra_cap if k_hi is None else min(k_hi, extra_cap)
        if not started:
            k_lo = max(k_lo, 1)
        if (k_hi is not None and k_hi < k_lo) or (extra is ra.EMPTY and k_lo > 0):
            return ra.EMPTY
        if extra is ra.EMPTY:
            return ra.EPSILON
        if started:
            return ra.repeat(ra.seq(sep, extra), k_lo, k_hi)
        more_hi = None if k_hi is None else k_hi - 1
        return ra.seq(extra, ra.repeat(ra.seq(sep, extra), k_lo - 1, more_hi))

    # built from the last position backwards, so no recursion is needed
    for i in range(n, -1, -1):
        top = max_props if max_props is not None else min_props
        for count in range(0, (top if top is not None else 0) + 1):
            for started in (False, True):
                if i == n:
                    node = tail_extras(count, started)
                else:
                    member, required = members[i]
                    nxt = memo.get((i + 1, _clamp(count + 1, min_props, max_props), True),
                                   ra.EMPTY)
                    present = ra.seq(sep if started else ra.EPSILON, member, nxt)
                    node = present if required else \
                        ra.alt(present, memo[(i + 1, count, started)])
                memo[(i, count, started)] = node
    return memo[(0, 0, False)]


def _clamp(count: int, min_props: int, max_props: int | None) -> int:
    """Counts past min matter only against max; past max the branch is dead (absent key)."""
    if max_props is None:
        return min(count, min_props)
    return count


def object_node(c: SchemaContext, f: Facts) -> ra.Node:
    """Regex tree of the objects allowed by ``f``."""
    return _ObjectBuilder(c, f).build()
