"""Parse regex text (Python/Rust or ECMA-262 flavour) into a character-level :mod:`.tree`.

Supported: literals and escapes, classes (ranges, negation, ``\\d\\w\\s`` and negations),
``.``, groups (capturing, ``(?:``, named), alternation, ``* + ? {n} {n,} {n,m} {,m}`` (lazy
``?`` suffixes accepted: they do not change the language), anchors ``^``/``$`` at the edges of
a branch. Rejected with a :class:`GrammarError` naming the construct: lookarounds,
backreferences, word boundaries, inline flags, possessive quantifiers, Unicode properties.

``\\d``, ``\\w`` are ASCII (as in ECMA-262 and JSON Schema); ``\\s`` is ECMA's white space.
``.`` excludes ``\\n`` (and in ECMA also ``\\r``, U+2028, U+2029).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GrammarError
from . import tree as ra

DIGIT = ((0x30, 0x39),)
WORD = ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A))
SPACE = ra.char_ranges([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680),
                        (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
                        (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])
_CLASS_ESCAPES = {"d": DIGIT, "w": WORD, "s": SPACE}
_SIMPLE_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "0": 0x00,
                   "a": 0x07, "e": 0x1B}
_DOT_EXCLUDES = {"python": ((0x0A, 0x0A),),
                 "ecma": ((0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029))}


class _Anchor(ra.Node):
    """Zero-width ``^``/``$`` marker; removed by :func:`split_anchors`."""

    __slots__ = ("end", "nullable", "constrained")

    def __init__(self, end: bool) -> None:
        self.end = end
        self.nullable = True  # zero width
        self.constrained = False


@dataclass(frozen=True)
class Branch:
    """One top-level alternative with its anchoring."""

    anchored_start: bool
    body: ra.Node
    anchored_end: bool


class _Parser:
    def __init__(self, pattern: str, dialect: str) -> None:
        if dialect not in _DOT_EXCLUDES:
            raise ValueError(f"regex dialect must be 'python' or 'ecma', got {dialect!r}")
        self.s = pattern
        self.i = 0
        self.dialect = dialect

    def error(self, what: str) -> GrammarError:
        return GrammarError(f"regex {self.s!r}: {what} (at position {self.i})")

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.s[j] if j < len(self.s) else ""

    def parse(self) -> ra.Node:
        node = self.parse_alt()
        if self.i < len(self.s):
            raise self.error("unbalanced ')'")
        return node

    def parse_alt(self) -> ra.Node:
        options = [self.parse_seq()]
        while self.peek() == "|":
            self.i += 1
            options.append(self.parse_seq())
        return options[0] if len(options) == 1 else _alt_keep_empty(options)

    def parse_seq(self) -> ra.Node:
        items = []
        while self.i < len(self.s) and self.peek() not in "|)":
            items.append(self.parse_quantified())
        return _seq_keep_anchors(items)

    def parse_quantified(self) -> ra.Node:
        atom = self.parse_atom()
        while True:
            bounds = self.parse_quantifier()
            if bounds is None:
                return atom
            if isinstance(atom, _Anchor) or _has_anchor(atom):
                raise self.error("a quantifier on an anchor is not supported")
            if self.peek() == "+":
                raise self.error("possessive quantifiers are not supported")
            if self.peek() == "?":
                self.i += 1  # lazy: same language
            atom = ra.repeat(atom, *bounds)

    def parse_quantifier(self) -> tuple[int, int | None] | None:
        c = self.peek()
        if c in "*+?" and c:
            self.i += 1
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if c == "{":
            end = self.s.find("}", self.i)
            body = self.s[self.i + 1: end] if end > 0 else ""
            lo_s, sep, hi_s = body.partition(",")
            if end > 0 and (lo_s.isdigit() or (sep and lo_s == "" and hi_s.isdigit())) and \
                    (hi_s == "" or hi_s.isdigit()):
                self.i = end + 1
                lo = int(lo_s) if lo_s else 0
                hi = (int(hi_s) if hi_s else None) if sep else lo
                if hi is not None and hi < lo:
                    raise self.error(f"quantifier {{{body}}} has max < min")
                return lo, hi
        return None

    def parse_atom(self) -> ra.Node:
        c = self.peek()
        self.i += 1
        if c == "(":
            return self.parse_group()
        if c == "[":
            return ra.chars(self.parse_class())
        if c == ".":
            return ra.chars(ra.negate_ranges(_DOT_EXCLUDES[self.dialect]))
        if c == "^":
            return _Anchor(end=False)
        if c == "$":
            return _Anchor(end=True)
        if c == "\\":
            ranges = self.parse_escape(in_class=False)
            return ra.chars(ranges)
        if c in "*+?":
            raise self.error(f"nothing to repeat before {c!r}")
        if c == "{" and self.is_quantifier_at(self.i - 1):
            raise self.error("nothing to repeat before '{'")
        return ra.lit(c)

    def is_quantifier_at(self, pos: int) -> bool:
        saved, self.i = self.i, pos
        try:
            return self.parse_quantifier() is not None
        finally:
            self.i = saved

    def parse_group(self) -> ra.Node:
        if self.peek() == "?":
            nxt = self.peek(1)
            if nxt == ":":
                self.i += 2
            elif nxt == "P" and self.peek(2) == "<" or nxt == "<" and self.peek(2) not in "=!":
                end = self.s.find(">", self.i)
                if end < 0:
                    raise self.error("unterminated group name")
                self.i = end + 1
            elif nxt in "=!" or (nxt == "<" and self.peek(2) in "=!"):
                raise self.error("lookaround assertions are not supported")
            elif nxt == "#":
                end = self.s.find(")", self.i)
                self.i = end + 1 if end > 0 else len(self.s)
                return ra.EPSILON
            else:
                raise self.error("inline flags and other (? extensions are not supported")
        node = self.parse_alt()
        if self.peek() != ")":
            raise self.error("missing ')'")
        self.i += 1
        return node

    def parse_class(self) -> tuple[tuple[int, int], ...]:
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        first = True
        while True:
            c = self.peek()
            if c == "":
                raise self.error("unterminated character class")
            if c == "]" and not (first and self.dialect == "python"):
                self.i += 1
                break
            first = False
            lo_ranges = self.parse_class_atom()
            if self.peek() == "-" and self.peek(1) not in ("]", "") and len(lo_ranges) == 1 \
                    and lo_ranges[0][0] == lo_ranges[0][1]:
                self.i += 1
                hi_ranges = self.parse_class_atom()
                if len(hi_ranges) != 1 or hi_ranges[0][0] != hi_ranges[0][1]:
                    raise self.error("a class range must end in a single character")
                lo, hi = lo_ranges[0][0], hi_ranges[0][0]
                if hi < lo:
                    raise self.error(f"class range {chr(lo)!r}-{chr(hi)!r} is reversed")
                ranges.append((lo, hi))
            else:
                ranges.extend(lo_ranges)
        norm = ra.char_ranges(ranges)
        return ra.negate_ranges(norm) if negate else norm

    def parse_class_atom(self) -> tuple[tuple[int, int], ...]:
        c = self.peek()
        self.i += 1
        if c == "\\":
            return self.parse_escape(in_class=True)
        if c == "[" and self.peek() == ":":
            raise self.error("POSIX classes like [:alpha:] are not supported")
        return ((ord(c), ord(c)),)

    def parse_escape(self, in_class: bool) -> tuple[tuple[int, int], ...]:
        c = self.peek()
        if c == "":
            raise self.error("trailing backslash")
        self.i += 1
        if c.lower() in _CLASS_ESCAPES:
            base = _CLASS_ESCAPES[c.lower()]
            return ra.negate_ranges(base) if c.isupper() else base
        if c in _SIMPLE_ESCAPES and not (c == "0" and self.peek().isdigit()):
            return _single(_SIMPLE_ESCAPES[c])
        if c == "b":
            if in_class:
                return _single(0x08)
            raise self.error("word boundaries (\\b) are not supported")
        if c == "x":
            return _single(self.parse_hex(2))
        if c == "u":
            if self.peek() == "{":
                end = self.s.find("}", self.i)
                return _single(self.parse_hex_text(self.s[self.i + 1: end], end + 1))
            return _single(self.parse_hex(4))
        if c == "U":
            return _single(self.parse_hex(8))
        if c == "c" and self.peek().isalpha():
            self.i += 1
            return _single(ord(self.s[self.i - 1].upper()) - 64)
        if c.isdigit():
            raise self.error("backreferences are not supported")
        if c in "pP":
            raise self.error("Unicode property classes (\\p) are not supported")
        if c in "BAZzGk":
            raise self.error(f"the assertion \\{c} is not supported")
        if c.isalnum():
            raise self.error(f"unknown escape \\{c}")
        return _single(ord(c))

    def parse_hex(self, n: int) -> int:
        return self.parse_hex_text(self.s[self.i: self.i + n], self.i + n, exact=n)

    def parse_hex_text(self, text: str, new_pos: int, exact: int | None = None) -> int:
        if (exact is not None and len(text) != exact) or not text or \
                any(ch not in "0123456789abcdefABCDEF" for ch in text):
            raise self.error(f"bad hex escape {text!r}")
        cp = int(text, 16)
        if cp > ra.MAX_CODE_POINT:
            raise self.error(f"code point {text} out of range")
        self.i = new_pos
        return cp


def _single(cp: int) -> tuple[tuple[int, int], ...]:
    return ((cp, cp),)


def _alt_keep_empty(options: list[ra.Node]) -> ra.Node:
    """Alternation that keeps anchors (and empty branches) intact for split_anchors."""
    if any(_has_anchor(o) for o in options):
        return ra.Alt(tuple(options))
    return ra.alt(*options)


def _seq_keep_anchors(items: list[ra.Node]) -> ra.Node:
    if any(_has_anchor(i) for i in items):
        return ra.Seq(tuple(items)) if len(items) != 1 else items[0]
    return ra.seq(*items)


def _has_anchor(node: ra.Node) -> bool:
    if isinstance(node, _Anchor):
        return True
    return any(_has_anchor(c) for c in ra.children(node))


def split_anchors(node: ra.Node, pattern: str) -> list[Branch]:
    """Branches of a parsed regex with ``^``/``$`` turned into anchoring flags.

    Raises :class:`GrammarError` for an anchor that is not at the edge of a branch.
    """
    if isinstance(node, _Anchor):
        return [Branch(not node.end, ra.EPSILON, node.end)]
    if not _has_anchor(node):
        return [Branch(False, node, False)]
    if isinstance(node, ra.Alt):
        return [b for o in node.options for b in split_anchors(o, pattern)]
    if isinstance(node, ra.Seq):
        acc = [Branch(False, ra.EPSILON, False)]
        for item in node.items:
            acc = [_join(a, b, pattern) for a in acc for b in split_anchors(item, pattern)]
            acc = [b for b in acc if b is not None]
        return acc
    raise GrammarError(f"regex {pattern!r}: anchors inside a repetition are not supported")


def _join(a: Branch, b: Branch, pattern: str) -> Branch | None:
    if b.anchored_start and a.body is not ra.EPSILON:
        raise GrammarError(f"regex {pattern!r}: '^' in the middle of a pattern is not supported")
    if a.anchored_end and b.body is not ra.EPSILON:
        return None  # text after '$': this branch can never match
    return Branch(a.anchored_start or b.anchored_start, ra.seq(a.body, b.body),
                  a.anchored_end or b.anchored_end)


def parse_branches(pattern: str, dialect: str = "python") -> list[Branch]:
    """Top-level branches of ``pattern`` with their anchoring."""
    if not isinstance(pattern, str):
        raise GrammarError(f"regex: expected a string, got {type(pattern).__name__}")
    return split_anchors(_Parser(pattern, dialect).parse(), pattern)


def regex_to_node(pattern: str, dialect: str = "python") -> ra.Node:
    """Full-match semantics (as for ``regex=`` constraints): edge anchors are redundant."""
    return ra.alt(*(b.body for b in parse_branches(pattern, dialect)))


def search_node(pattern: str, any_char: ra.Node, dialect: str = "ecma") -> ra.Node:
    """JSON Schema ``pattern`` semantics: the pattern may match anywhere unless anchored."""
    free = ra.star(any_char)
    options = []
    for b in parse_branches(pattern, dialect):
        options.append(ra.seq(ra.EPSILON if b.anchored_start else free, b.body,
                              ra.EPSILON if b.anchored_end else free))
    return ra.alt(*options)
