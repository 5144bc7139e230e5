"""Parse a GBNF/EBNF grammar (the subset llama.cpp's GBNF and xgrammar's EBNF share) into rules.

Syntax::

    root    ::= command ("\\n" command)*      # the start rule is ``root``
    command ::= "go " dir | "say " [a-z]{1,8}
    dir     ::= "north" | "south"

Rules are ``name ::= expression`` (a rule may span lines: it ends where the next
``name ::=`` begins); names are ``[A-Za-z_][A-Za-z0-9_-]*``. Expressions: sequences,
alternation ``|``, grouping ``( )``, repetition ``* + ?`` and ``{m}`` ``{m,}`` ``{m,n}``,
string literals ``"..."`` (or ``'...'``), character classes ``[a-z_]`` / ``[^"\\\\]``, ``.``
(any character) and rule references. Escapes in literals and classes: ``\\n \\t \\r \\\\ \\"
\\' \\] \\[ \\- \\^ \\xHH \\uHHHH \\UHHHHHHHH``. ``#`` starts a comment to the end of the line.
Anything else (lookaheads, ``:``-style rules, semantic actions) is a :class:`GrammarError`
naming the line and column.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GrammarError
from ..regex import tree as ra

MAX_REPEAT = 65_535  # bounds above this are refused (the automaton counts them)


class Expr:
    """Base class of grammar expressions (before rule references are resolved)."""

    __slots__ = ()


@dataclass(frozen=True, slots=True)
class Terminal(Expr):
    """A literal or character class, already a regex node."""

    node: ra.Node


@dataclass(frozen=True, slots=True)
class Ref(Expr):
    """A reference to rule ``name`` (``line`` for error messages)."""

    name: str
    line: int


@dataclass(frozen=True, slots=True)
class Sequence(Expr):
    """Concatenation."""

    items: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Choice(Expr):
    """Alternation."""

    options: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Repetition(Expr):
    """``item{lo,hi}`` (``hi`` None: unbounded)."""

    item: Expr
    lo: int
    hi: int | None


@dataclass(frozen=True)
class Grammar:
    """Rules by name, in definition order, and the start rule's name."""

    rules: dict[str, Expr]
    start: str


_NAME_START = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ_")
_NAME_CHARS = _NAME_START | set("0123456789-")
_SIMPLE_ESCAPES = {"n": 0x0A, "t": 0x09, "r": 0x0D, "f": 0x0C, "v": 0x0B, "0": 0x00,
                   "\\": 0x5C, '"': 0x22, "'": 0x27, "]": 0x5D, "[": 0x5B, "-": 0x2D,
                   "^": 0x5E, "/": 0x2F}
_HEX_ESCAPES = {"x": 2, "u": 4, "U": 8}
ANY_CHAR = ra.chars([(0, ra.MAX_CODE_POINT)])


class _Parser:
    def __init__(self, text: str) -> None:
        self.s = text
        self.i = 0

    # -- positions and errors ------------------------------------------------------------

    def where(self, i: int | None = None) -> str:
        i = self.i if i is None else i
        line = self.s.count("\n", 0, i) + 1
        col = i - (self.s.rfind("\n", 0, i) + 1) + 1
        return f"line {line}, column {col}"

    def line(self) -> int:
        return self.s.count("\n", 0, self.i) + 1

    def error(self, what: str, i: int | None = None) -> GrammarError:
        return GrammarError(f"ebnf: {what} at {self.where(i)}")

    def skip_space(self, newlines: bool = True) -> None:
        while self.i < len(self.s):
            c = self.s[self.i]
            if c == "#":
                end = self.s.find("\n", self.i)
                self.i = len(self.s) if end < 0 else end
            elif c in " \t\r" or (newlines and c == "\n"):
                self.i += 1
            else:
                return

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    # -- rules ----------------------------------------------------------------------------

    def grammar(self) -> dict[str, Expr]:
        rules: dict[str, Expr] = {}
        self.skip_space()
        while self.i < len(self.s):
            start = self.i
            name = self.name()
            if name is None:
                raise self.error(f"expected a rule name, found {self.peek()!r}")
            self.skip_space()
            if not self.s.startswith("::=", self.i):
                raise self.error(f"expected '::=' after rule name {name!r}")
            self.i += 3
            if name in rules:
                raise self.error(f"rule {name!r} is defined twice", start)
            rules[name] = self.choice(top=True)
            self.skip_space()
        return rules

    def name(self) -> str | None:
        if self.peek() not in _NAME_START or not self.peek():
            return None
        j = self.i
        while j < len(self.s) and self.s[j] in _NAME_CHARS:
            j += 1
        name, self.i = self.s[self.i:j], j
        return name

    def at_rule_start(self) -> bool:
        """Whether ``name ::=`` follows (the current rule ended)."""
        j = self.i
        if j >= len(self.s) or self.s[j] not in _NAME_START:
            return False
        while j < len(self.s) and self.s[j] in _NAME_CHARS:
            j += 1
        while j < len(self.s) and self.s[j] in " \t\r\n":
            j += 1
        return self.s.startswith("::=", j)

    # -- expressions ----------------------------------------------------------------------

    def choice(self, top: bool = False) -> Expr:
        options = [self.sequence(top)]
        while True:
            self.skip_space()
            if self.peek() != "|":
                break
            self.i += 1
            options.append(self.sequence(top))
        return options[0] if len(options) == 1 else Choice(tuple(options))

    def sequence(self, top: bool) -> Expr:
        items: list[Expr] = []
        while True:
            self.skip_space()
            c = self.peek()
            if not c or c in "|)" or (top and self.at_rule_start()):
                break
            items.append(self.postfix(self.atom()))
        if not items:
            return Terminal(ra.EPSILON)  # an empty alternative matches ""
        return items[0] if len(items) == 1 else Sequence(tuple(items))

    def atom(self) -> Expr:
        c = self.peek()
        if c in "\"'":
            return Terminal(self.literal(c))
        if c == "[":
            return Terminal(self.char_class())
        if c == ".":
            self.i += 1
            return Terminal(ANY_CHAR)
        if c == "(":
            open_at = self.i
            self.i += 1
            inner = self.choice()
            self.skip_space()
            if self.peek() != ")":
                raise self.error("unclosed '('", open_at)
            self.i += 1
            return inner
        line = self.line()
        name = self.name()
        if name is not None:
            return Ref(name, line)
        raise self.error(f"unexpected {c!r} (expected a literal, a class, a group or a rule "
                         f"name)")

    def postfix(self, item: Expr) -> Expr:
        while True:
            c = self.peek()
            if c == "*":
                item, self.i = Repetition(item, 0, None), self.i + 1
            elif c == "+":
                item, self.i = Repetition(item, 1, None), self.i + 1
            elif c == "?":
                item, self.i = Repetition(item, 0, 1), self.i + 1
            elif c == "{":
                item = Repetition(item, *self.braces())
            else:
                return item

    def braces(self) -> tuple[int, int | None]:
        start = self.i
        end = self.s.find("}", self.i)
        if end < 0:
            raise self.error("unclosed '{'", start)
        body = self.s[self.i + 1:end].replace(" ", "")
        self.i = end + 1
        lo_text, comma, hi_text = body.partition(",")
        try:
            lo = int(lo_text) if lo_text else 0
            hi = (int(hi_text) if hi_text else None) if comma else lo
        except ValueError:
            raise self.error(f"bad repetition {{{body}}} (expected {{m}}, {{m,}} or {{m,n}})",
                             start) from None
        if lo < 0 or (hi is not None and hi < lo) or max(lo, hi or 0) > MAX_REPEAT:
            raise self.error(f"bad repetition bounds {{{body}}} (need 0 <= m <= n <= "
                             f"{MAX_REPEAT})", start)
        return lo, hi

    # -- terminals ------------------------------------------------------------------------

    def escape(self) -> int:
        """One escaped code point; ``self.i`` is at the backslash."""
        at = self.i
        self.i += 1
        c = self.peek()
        if c in _SIMPLE_ESCAPES:
            self.i += 1
            return _SIMPLE_ESCAPES[c]
        if c in _HEX_ESCAPES:
            n = _HEX_ESCAPES[c]
            digits = self.s[self.i + 1:self.i + 1 + n]
            if len(digits) != n or any(d not in "0123456789abcdefABCDEF" for d in digits):
                raise self.error(f"bad escape \\{c} (expected {n} hex digits)", at)
            self.i += 1 + n
            cp = int(digits, 16)
            if cp > ra.MAX_CODE_POINT:
                raise self.error(f"escape \\{c}{digits} is past U+10FFFF", at)
            return cp
        raise self.error(f"unknown escape \\{c}", at)

    def literal(self, quote: str) -> ra.Node:
        start = self.i
        self.i += 1
        out: list[int] = []
        while True:
            c = self.peek()
            if not c or c == "\n":
                raise self.error("unterminated string literal", start)
            if c == quote:
                self.i += 1
                return ra.seq(*(ra.chars([(cp, cp)]) for cp in out))
            if c == "\\":
                out.append(self.escape())
            else:
                out.append(ord(c))
                self.i += 1

    def char_class(self) -> ra.Node:
        start = self.i
        self.i += 1
        negated = self.peek() == "^"
        if negated:
            self.i += 1
        ranges: list[tuple[int, int]] = []
        while True:
            c = self.peek()
            if not c:
                raise self.error("unclosed character class", start)
            if c == "]":
                self.i += 1
                break
            lo = self.class_char()
            hi = lo
            if self.peek() == "-" and self.s[self.i + 1:self.i + 2] not in ("]", ""):
                self.i += 1
                hi = self.class_char()
                if hi < lo:
                    raise self.error(f"bad class range {chr(lo)!r}-{chr(hi)!r}", start)
            ranges.append((lo, hi))
        norm = ra.negate_ranges(ranges) if negated else ra.char_ranges(ranges)
        if not norm:
            raise self.error("character class matches nothing", start)
        return ra.chars(norm)

    def class_char(self) -> int:
        if self.peek() == "\\":
            return self.escape()
        cp = ord(self.peek())
        self.i += 1
        return cp


def parse_ebnf(text: str, start: str = "root") -> Grammar:
    """Parse grammar text into rules; checks that every referenced rule and ``start`` exist."""
    if not isinstance(text, str) or not text.strip():
        raise GrammarError("ebnf: expected grammar text with at least a 'root ::= ...' rule")
    rules = _Parser(text).grammar()
    if start not in rules:
        raise GrammarError(f"ebnf: no start rule {start!r} (define '{start} ::= ...')")
    for name, expr in rules.items():
        for ref in _refs(expr):
            if ref.name not in rules:
                raise GrammarError(f"ebnf: rule {name!r} refers to undefined rule "
                                   f"{ref.name!r} (line {ref.line})")
    return Grammar(rules, start)


def _refs(expr: Expr) -> list[Ref]:
    """Rule references inside ``expr``."""
    if isinstance(expr, Ref):
        return [expr]
    if isinstance(expr, Sequence):
        return [r for item in expr.items for r in _refs(item)]
    if isinstance(expr, Choice):
        return [r for option in expr.options for r in _refs(option)]
    if isinstance(expr, Repetition):
        return _refs(expr.item)
    return []


def references(expr: Expr) -> set[str]:
    """Names of the rules ``expr`` refers to."""
    return {r.name for r in _refs(expr)}
