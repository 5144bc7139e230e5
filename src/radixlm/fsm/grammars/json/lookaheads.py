"""``pattern`` with leading lookaheads: ``^(?!X)(?=Y)R`` as an intersection, exactly.

At the start of the string, ``(?=Y)`` holds iff the string starts with a match of ``Y`` and
``(?!X)`` iff it does not, so ``^(?!X)(?=Y)R`` (search semantics) is ``search(^R)`` ∩
``Y…`` ∖ ``X…``: regexes over the decoded string that the string builders intersect and
subtract. The "tempered" ``^((?!X)c)*$`` (no match of ``X`` starts anywhere, every
character a ``c``) is a subtraction too. Lookarounds anywhere else stay refused by the regex
parser, by name.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ...regex import tree as ra
from ...regex.parser import parse_branches, search_node
from .context import SchemaContext
from .strings import ANY_CHAR


@dataclass(frozen=True)
class PatternParts:
    """A pattern as decoded-string regexes: matched iff all of ``require`` and none of
    ``forbid`` match the whole string."""

    require: tuple[ra.Node, ...]
    forbid: tuple[ra.Node, ...]

    @property
    def single(self) -> ra.Node | None:
        """The one regex equal to the pattern, when it has no lookahead."""
        return self.require[0] if len(self.require) == 1 and not self.forbid else None


def _group_end(pattern: str, start: int) -> int | None:
    """Index just past the group opening at ``start`` (escapes and classes skipped)."""
    depth, i, in_class = 0, start, False
    while i < len(pattern):
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if in_class:
            in_class = ch != "]"
        elif ch == "[":
            in_class = True
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


def _leading_lookaheads(pattern: str) -> tuple[list[tuple[bool, str]], str] | None:
    """([(positive, body)], rest) for ``^(?=..)(?!..)rest``; None when there are none."""
    if not pattern.startswith("^"):
        return None
    looks, i = [], 1
    while pattern.startswith(("(?=", "(?!"), i):
        end = _group_end(pattern, i)
        if end is None:
            return None
        looks.append((pattern[i + 2] == "=", pattern[i + 3:end - 1]))
        i = end
    if not looks:
        return None
    return looks, "^" + pattern[i:]


def _tempered(pattern: str) -> PatternParts | None:
    """``^((?!A)(?!B)X)*$`` with ``X`` one character: before every character the rest of
    the string starts with no match of ``A`` or ``B``, i.e. the string is ``X*`` and no
    match of ``A`` or ``B`` starts anywhere in it (``A``, ``B`` must not match the empty
    string: a match starting at the very end would not be looked for). None otherwise."""
    opening = "^(?:" if pattern.startswith("^(?:") else "^("
    if not pattern.startswith(opening) or not pattern.endswith(")*$"):
        return None
    if _group_end(pattern, 1) != len(pattern) - 2:
        return None  # the group must close just before ")*$"
    inner = pattern[len(opening):-3]
    split = _leading_lookaheads("^" + inner)
    if split is None or any(positive for positive, _ in split[0]):
        return None
    looks, rest = split
    item = parse_branches(rest, "ecma")
    if len(item) != 1 or not isinstance(item[0].body, ra.Chars) or item[0].anchored_end:
        return None  # not a single character
    forbid = [search_node(f"(?:{body})", ANY_CHAR) for _, body in looks]
    if any(node.nullable for node in forbid):
        return None
    return PatternParts((search_node(f"^(?:{rest[1:]})*$", ANY_CHAR),), tuple(forbid))


def _trailing_lookahead(pattern: str) -> str | None:
    """``R(?=L)`` (the lookahead last, at the top level, unanchored after it) as ``R(?:L)``:
    a search finds a match of R followed by one of L exactly where it finds R L (what L
    reads is free in a search anyway; under a top-level ``|`` both bind to the last
    alternative). None for any other pattern."""
    start, i = None, 0
    while i < len(pattern):  # the last top-level group's opening
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "[":
            end = _class_end(pattern, i)
            if end is None:
                return None
            i = end
            continue
        if pattern[i] == "(":
            end = _group_end(pattern, i)
            if end is None:
                return None
            start, i = i, end
            continue
        start = None if pattern[i] != ")" else start
        i += 1
    if start is None or not pattern.startswith("(?=", start) or \
            _group_end(pattern, start) != len(pattern):
        return None
    return pattern[:start] + "(?:" + pattern[start + 3:]


def _class_end(pattern: str, start: int) -> int | None:
    """Index just past the character class opening at ``start``."""
    i = start + 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]" and i > start + 1:
            return i + 1
        i += 1
    return None


@lru_cache(maxsize=4096)
def pattern_parts(pattern: str) -> PatternParts:
    """The pattern's regexes (GrammarError, naming the construct, when unsupported).

    Memoised (the trees are immutable): a distributed ``anyOf``/``allOf`` compiles a
    string's patterns once per combination (Handwritten's allany14: 729 combinations of 7
    patterns parsed 5,103 times, 2.9 s of its 5.1 s refusal); one tree per pattern also lets
    the string encoder's and the automaton's memos, keyed by node, hit across combinations."""
    tempered = _tempered(pattern)
    if tempered is not None:
        return tempered
    trailing = _trailing_lookahead(pattern)
    if trailing is not None and not pattern.startswith(("^(?=", "^(?!")):
        return PatternParts((search_node(trailing, ANY_CHAR),), ())
    split = _leading_lookaheads(pattern)
    if split is None or len(parse_branches(split[1], "ecma")) != 1:
        # no leading lookahead, or a top-level "|" that the lookaheads do not cover
        return PatternParts((search_node(pattern, ANY_CHAR),), ())
    looks, rest = split
    require = [search_node(rest, ANY_CHAR)]
    forbid = []
    for positive, body in looks:
        node = search_node(f"^(?:{body})", ANY_CHAR)  # a match of body at the start
        (require if positive else forbid).append(node)
    return PatternParts(tuple(require), tuple(forbid))


def negated_pattern(c: SchemaContext, pattern: str) -> list[ra.Node]:
    """The regex whose matches a string must avoid (``not {pattern}``, a pattern other keys
    match): a union of parts is not one regex, so a lookahead there is refused by name
    (``[]`` when ignored under ``lenient``)."""
    single = pattern_parts(pattern).single
    if single is None:
        c.unsupported("pattern", f"a pattern with a leading lookahead where it must not "
                                 f"match ({pattern!r})")
        return []
    return [single]
