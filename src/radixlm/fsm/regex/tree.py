"""Character-level regular expressions as a small immutable tree (a DAG where parts are shared).

The JSON-Schema compiler builds these nodes directly and the regex parser produces them, so big
schemas never go through regex *text*: shared sub-schemas stay shared nodes. :func:`render`
prints a node as a regex that Python's ``re`` and Rust's ``regex`` crate (outlines-core) both
read the same way; only :class:`Constrained` needs lookaheads (Python ``re`` only).

Nodes compare by identity; the smart constructors (:func:`seq`, :func:`alt`, :func:`repeat`)
keep trees small (flattening, dropping neutral elements) and map every unsatisfiable part to
:data:`EMPTY`.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

MAX_CODE_POINT = 0x10FFFF
SURROGATES = (0xD800, 0xDFFF)


class Node:
    """Base class of regex nodes (identity semantics: hashing and equality by object)."""

    __slots__ = ()


@dataclass(frozen=True, eq=False, slots=True)
class Chars(Node):
    """One character out of sorted, disjoint, non-adjacent inclusive code-point ranges."""

    ranges: tuple[tuple[int, int], ...]
    nullable: bool = field(default=False, init=False)
    constrained: bool = field(default=False, init=False)


@dataclass(frozen=True, eq=False, slots=True)
class Seq(Node):
    """Concatenation; ``Seq(())`` is the empty string."""

    items: tuple[Node, ...]
    nullable: bool = field(default=False, init=False)
    constrained: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        _set_properties(self, all(i.nullable for i in self.items), self.items)


@dataclass(frozen=True, eq=False, slots=True)
class Alt(Node):
    """Alternation of at least two options."""

    options: tuple[Node, ...]
    nullable: bool = field(default=False, init=False)
    constrained: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        _set_properties(self, any(o.nullable for o in self.options), self.options)


@dataclass(frozen=True, eq=False, slots=True)
class Repeat(Node):
    """``item{lo,hi}``; ``hi`` None means unbounded."""

    item: Node
    lo: int
    hi: int | None
    nullable: bool = field(default=False, init=False)
    constrained: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        _set_properties(self, self.lo == 0 or self.item.nullable, (self.item,))


@dataclass(frozen=True, eq=False, slots=True)
class Constrained(Node):
    """``base`` intersected with every ``require`` and with no ``forbid`` (whole-match semantics).

    Used where the matched text always ends where ``terminator`` (regex text) first holds, e.g.
    a JSON string's content (terminator ``"``, which the content never holds unescaped) or a
    number (terminator: a lookahead for a non-number character). That makes the lookahead
    rendering ``(?=(?:R)T)(?!(?:F)T)(?:B)`` exact for Python's ``re``.
    """

    base: Node
    require: tuple[Node, ...]
    forbid: tuple[Node, ...]
    terminator: str
    nullable: bool = field(default=False, init=False)
    constrained: bool = field(default=True, init=False)

    def __post_init__(self) -> None:
        nullable = self.base.nullable and all(r.nullable for r in self.require) and \
            not any(f.nullable for f in self.forbid)
        object.__setattr__(self, "nullable", nullable)


class AsciiMachine(Protocol):
    """A deterministic automaton over ASCII characters (code point = UTF-8 byte) in which
    every state it ever returns is live: some continuation from it is accepted. Used for
    languages whose regex form is huge but whose automaton is small (decimal residues)."""

    def step(self, state: Hashable, byte: int) -> Hashable | None:
        """The next state, or None where the character leads to no accepted string."""

    def accepting(self, state: Hashable) -> bool:
        """Whether the text read so far is accepted."""

    def classes(self, state: Hashable) -> tuple[int, ...]:
        """A partition of the 256 bytes (bit masks) on whose parts ``step`` is constant."""

    def to_node(self, state: Hashable) -> Node:
        """An equivalent regex tree (for printing); may raise :class:`RenderTooLargeError`."""


@dataclass(frozen=True, eq=False, slots=True)
class Automaton(Node):
    """The strings ``machine`` accepts from ``state`` (a leaf: no regex sub-nodes)."""

    machine: AsciiMachine
    state: Hashable
    nullable: bool = field(default=False, init=False)
    constrained: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "nullable", self.machine.accepting(self.state))


def _set_properties(node: Node, nullable: bool, parts: tuple[Node, ...]) -> None:
    """Derived flags, computed once at construction (nodes are immutable): whether the node
    matches the empty string, and whether it contains a :class:`Constrained` part."""
    object.__setattr__(node, "nullable", nullable)
    object.__setattr__(node, "constrained", any(p.constrained for p in parts))


EMPTY = Chars(())
EPSILON = Seq(())


def char_ranges(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Normalise ranges: sort, merge overlapping/adjacent, drop empty ones."""
    out: list[list[int]] = []
    for lo, hi in sorted(r for r in ranges if r[0] <= r[1]):
        if out and lo <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], hi)
        else:
            out.append([lo, hi])
    return tuple((lo, hi) for lo, hi in out)


def negate_ranges(ranges: Sequence[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Complement within all code points (surrogates are left to the byte lowering)."""
    out, nxt = [], 0
    for lo, hi in char_ranges(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_CODE_POINT:
        out.append((nxt, MAX_CODE_POINT))
    return tuple(out)


def subtract_ranges(
    ranges: Sequence[tuple[int, int]], removed: Sequence[tuple[int, int]]
) -> tuple[tuple[int, int], ...]:
    """``ranges`` minus ``removed``."""
    return intersect_ranges(ranges, negate_ranges(removed))


def intersect_ranges(
    a: Sequence[tuple[int, int]], b: Sequence[tuple[int, int]]
) -> tuple[tuple[int, int], ...]:
    """Code points in both range lists."""
    out = []
    for lo1, hi1 in a:
        for lo2, hi2 in b:
            lo, hi = max(lo1, lo2), min(hi1, hi2)
            if lo <= hi:
                out.append((lo, hi))
    return char_ranges(out)


def chars(ranges: Iterable[tuple[int, int]]) -> Node:
    """A character class; the empty class is :data:`EMPTY`."""
    norm = char_ranges(ranges)
    return Chars(norm) if norm else EMPTY


def char_set(text: str) -> Node:
    """A class of the characters in ``text``."""
    return chars((ord(c), ord(c)) for c in text)


def lit(text: str) -> Node:
    """The literal string ``text`` (what ``seq`` of its characters gives, built directly)."""
    if len(text) == 1:
        return Chars(((ord(text), ord(text)),))
    return Seq(tuple(Chars(((ord(c), ord(c)),)) for c in text)) if text else EPSILON


def seq(*items: Node) -> Node:
    """Concatenation with flattening; any :data:`EMPTY` part makes the whole EMPTY."""
    flat: list[Node] = []
    for item in items:
        if item is EMPTY:
            return EMPTY
        if isinstance(item, Seq):
            flat.extend(item.items)
        else:
            flat.append(item)
    if len(flat) == 1:
        return flat[0]
    return Seq(tuple(flat)) if flat else EPSILON


def alt(*options: Node) -> Node:
    """Alternation with flattening and de-duplication (by identity); drops EMPTY options."""
    flat: list[Node] = []
    seen: set[int] = set()
    for option in options:
        parts = option.options if isinstance(option, Alt) else (option,)
        for part in parts:
            if part is not EMPTY and id(part) not in seen:
                seen.add(id(part))
                flat.append(part)
    if not flat:
        return EMPTY
    return flat[0] if len(flat) == 1 else Alt(tuple(flat))


def repeat(item: Node, lo: int, hi: int | None) -> Node:
    """``item{lo,hi}`` (``hi`` None: unbounded), simplified."""
    if lo < 0 or (hi is not None and hi < lo):
        raise ValueError(f"repeat bounds: expected 0 <= lo <= hi, got lo={lo}, hi={hi}")
    if hi == 0 or item is EPSILON:
        return EPSILON
    if item is EMPTY:
        return EPSILON if lo == 0 else EMPTY
    if lo == 1 and hi == 1:
        return item
    return Repeat(item, lo, hi)


def opt(item: Node) -> Node:
    """``item?``."""
    return repeat(item, 0, 1)


def star(item: Node) -> Node:
    """``item*``."""
    return repeat(item, 0, None)


def constrained(
    base: Node, require: Sequence[Node] = (), forbid: Sequence[Node] = (), terminator: str = '"'
) -> Node:
    """``base`` ∩ every ``require`` ∖ every ``forbid``; see :class:`Constrained`."""
    if base is EMPTY or any(r is EMPTY for r in require):
        return EMPTY
    forbid = tuple(f for f in forbid if f is not EMPTY)
    require = tuple(r for r in require if r is not base)
    if not require and not forbid:
        return base
    return Constrained(base, require, forbid, terminator)


# ---------------------------------------------------------------------------------------------
# Rendering

_META = set("\\.+*?()|[]{}^$")
_CLASS_META = set("\\[]^-&~|")


def _escape_char(cp: int, in_class: bool) -> str:
    ch = chr(cp)
    if cp < 0x20 or cp == 0x7F:
        return f"\\x{cp:02x}"
    if cp < 0x7F:
        if ch in (_CLASS_META if in_class else _META):
            return "\\" + ch
        return ch
    if cp <= 0xFF:
        return f"\\x{cp:02x}"
    if cp <= 0xFFFF:
        return f"\\u{cp:04x}"
    return f"\\U{cp:08x}"


def _render_class(ranges: tuple[tuple[int, int], ...]) -> str:
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _escape_char(ranges[0][0], in_class=False)
    negated = negate_ranges(ranges)
    body_ranges, prefix = (ranges, "")
    if len(negated) < len(ranges) and negated:
        body_ranges, prefix = (negated, "^")
    parts = []
    for lo, hi in body_ranges:
        if lo == hi:
            parts.append(_escape_char(lo, True))
        elif hi == lo + 1:
            parts.append(_escape_char(lo, True) + _escape_char(hi, True))
        else:
            parts.append(_escape_char(lo, True) + "-" + _escape_char(hi, True))
    return "[" + prefix + "".join(parts) + "]"


class RenderTooLargeError(ValueError):
    """The rendered regex would exceed the allowed size."""


class _Renderer:
    """Prints nodes; memoises per node so shared parts are rendered once (then copied)."""

    def __init__(self, max_chars: int | None) -> None:
        self.max_chars = max_chars
        self.memo: dict[int, tuple[str, int]] = {}
        self.keep: list[Node] = []  # keeps memo keys (ids) alive

    def render(self, node: Node) -> tuple[str, int]:
        """(text, precedence): 0 alternation, 1 concatenation, 2 atom."""
        hit = self.memo.get(id(node))
        if hit is not None:
            return hit
        out = self._render(node)
        if self.max_chars is not None and len(out[0]) > self.max_chars:
            raise RenderTooLargeError(
                f"rendered regex exceeds {self.max_chars} characters (the grammar is kept as a "
                f"shared tree; its text form is too large to print)"
            )
        self.memo[id(node)] = out
        self.keep.append(node)
        return out

    def _atom(self, node: Node) -> str:
        text, prec = self.render(node)
        return text if prec == 2 else f"(?:{text})"

    def _render(self, node: Node) -> tuple[str, int]:
        if isinstance(node, Chars):
            if not node.ranges:
                raise ValueError("cannot render the empty language (the grammar matches nothing)")
            return _render_class(node.ranges), 2
        if isinstance(node, Seq):
            if not node.items:
                return "", 1
            parts = []
            for item in node.items:
                text, prec = self.render(item)
                parts.append(text if prec >= 1 else f"(?:{text})")
            return "".join(parts), 1 if len(node.items) > 1 else 2
        if isinstance(node, Alt):
            return "|".join(self.render(o)[0] for o in node.options), 0
        if isinstance(node, Repeat):
            inner = self._atom(node.item)
            if isinstance(node.item, Repeat):  # "a?*" is a syntax error: group the inner one
                inner = f"(?:{inner})"
            return inner + _quantifier(node.lo, node.hi), 2
        if isinstance(node, Constrained):
            term = node.terminator  # regex text
            req = "".join(f"(?=(?:{self.render(r)[0]}){term})" for r in node.require)
            forb = "".join(f"(?!(?:{self.render(f)[0]}){term})" for f in node.forbid)
            return f"{req}{forb}(?:{self.render(node.base)[0]})", 2
        if isinstance(node, Automaton):
            return self.render(node.machine.to_node(node.state))
        raise TypeError(f"not a regex node: {node!r}")


def _quantifier(lo: int, hi: int | None) -> str:
    if hi is None:
        return {0: "*", 1: "+"}.get(lo, f"{{{lo},}}")
    if lo == 0 and hi == 1:
        return "?"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def render(node: Node, max_chars: int | None = None) -> str:
    """Regex text for ``node`` (full-match semantics: callers use ``re.fullmatch``).

    Raises :class:`RenderTooLargeError` past ``max_chars``.
    """
    return _Renderer(max_chars).render(node)[0]


def uses_lookaround(node: Node) -> bool:
    """True when :func:`render` would need lookaheads (not readable by Rust's ``regex``)."""
    seen: set[int] = set()
    stack = [node]
    while stack:
        n = stack.pop()
        if id(n) in seen:
            continue
        seen.add(id(n))
        if isinstance(n, Constrained):
            return True
        stack.extend(children(n))
    return False


def children(node: Node) -> tuple[Node, ...]:
    """Direct sub-nodes."""
    if isinstance(node, Seq):
        return node.items
    if isinstance(node, Alt):
        return node.options
    if isinstance(node, Repeat):
        return (node.item,)
    if isinstance(node, Constrained):
        return (node.base, *node.require, *node.forbid)
    return ()
