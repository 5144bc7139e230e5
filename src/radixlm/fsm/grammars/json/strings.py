"""JSON string contents: decoded-character regexes turned into regexes over the JSON text.

A character class of the *decoded* string becomes, in the JSON text, its raw characters (all
but ``"``, ``\\`` and controls) or their escapes (``\\"``, ``\\\\``, ``\\/``, the short control
escapes and ``\\u00XX`` for the other controls). Every decoded character keeps the same set of
spellings wherever it occurs, so exclusions (``forbid``) stay exact.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...regex import tree as ra

ANY_CHAR = ra.chars([(0, ra.MAX_CODE_POINT)])
_NEEDS_ESCAPE = ((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C))
_SHORT_ESCAPES = {0x22: '"', 0x5C: "\\", 0x2F: "/", 0x08: "b", 0x0C: "f", 0x0A: "n",
                  0x0D: "r", 0x09: "t"}
_HEX = "0123456789abcdef"

_unit_cache: dict[tuple[tuple[int, int], ...], ra.Node] = {}


def _hex_class(values: Sequence[int]) -> ra.Node:
    text = "".join(_HEX[v] + (_HEX[v].upper() if v > 9 else "") for v in values)
    return ra.char_set(text)


def json_unit(ranges: tuple[tuple[int, int], ...]) -> ra.Node:
    """The JSON-text spellings of one decoded character out of ``ranges``."""
    hit = _unit_cache.get(ranges)
    if hit is not None:
        return hit
    options = [ra.chars(ra.subtract_ranges(ranges, _NEEDS_ESCAPE))]
    members = ra.intersect_ranges(ranges, ((0x00, 0x1F), (0x22, 0x22), (0x2F, 0x2F),
                                           (0x5C, 0x5C)))
    short = []
    by_high: dict[int, list[int]] = {}
    for lo, hi in members:
        for cp in range(lo, hi + 1):
            if cp in _SHORT_ESCAPES:
                short.append(_SHORT_ESCAPES[cp])
            else:
                by_high.setdefault(cp >> 4, []).append(cp & 0xF)
    if short:
        options.append(ra.seq(ra.lit("\\"), ra.char_set("".join(short))))
    for high, lows in sorted(by_high.items()):
        options.append(ra.seq(ra.lit("\\u00"), ra.lit(_HEX[high]), _hex_class(lows)))
    node = ra.alt(*options)
    _unit_cache[ranges] = node
    return node


ANY_UNIT = json_unit(ANY_CHAR.ranges)


class StringEncoder:
    """Maps decoded-string regex trees to JSON-text trees (memoised per node)."""

    def __init__(self) -> None:
        self._memo: dict[int, ra.Node] = {}
        self._keep: list[ra.Node] = []

    def encode(self, node: ra.Node) -> ra.Node:
        """JSON-text regex for the content of strings matching ``node``."""
        hit = self._memo.get(id(node))
        if hit is not None:
            return hit
        out = self._encode(node)
        self._memo[id(node)] = out
        self._keep.append(node)
        return out

    def _encode(self, node: ra.Node) -> ra.Node:
        if isinstance(node, ra.Chars):
            return json_unit(node.ranges) if node.ranges else ra.EMPTY
        if isinstance(node, ra.Seq):
            return ra.seq(*(self.encode(i) for i in node.items))
        if isinstance(node, ra.Alt):
            return ra.alt(*(self.encode(o) for o in node.options))
        if isinstance(node, ra.Repeat):
            return ra.repeat(self.encode(node.item), node.lo, node.hi)
        if isinstance(node, ra.Constrained):
            return ra.constrained(self.encode(node.base),
                                  [self.encode(r) for r in node.require],
                                  [self.encode(f) for f in node.forbid], terminator='"')
        raise TypeError(f"not a regex node: {node!r}")

    def literal(self, text: str) -> ra.Node:
        """All JSON spellings of the string ``text`` (content only, no quotes): the tree
        ``encode(ra.lit(text))`` gives, built straight from each character's spellings
        (property names and enum values are most of a schema's literals)."""
        return ra.seq(*(_char_unit(c) for c in text))


_char_unit_cache: dict[str, ra.Node] = {}


def _char_unit(char: str) -> ra.Node:
    """``json_unit`` of the one character ``char``."""
    hit = _char_unit_cache.get(char)
    if hit is None:
        code = ord(char)
        hit = _char_unit_cache[char] = json_unit(((code, code),))
    return hit


def quoted(content: ra.Node) -> ra.Node:
    """``"content"``."""
    return ra.seq(ra.lit('"'), content, ra.lit('"'))


def simple_repeat(node: ra.Node) -> tuple[ra.Chars, int, int | None] | None:
    """(class, lo, hi) when ``node`` is a single character class repeated, else None."""
    if isinstance(node, ra.Chars):
        return node, 1, 1
    if isinstance(node, ra.Repeat) and isinstance(node.item, ra.Chars):
        return node.item, node.lo, node.hi
    return None


def string_content(encoder: StringEncoder, min_len: int, max_len: int | None,
                   decoded: Sequence[ra.Node], forbid: Sequence[ra.Node]) -> ra.Node:
    """Content of strings with the length bounds, matching every ``decoded`` regex (full
    match, of the decoded value) and none of ``forbid`` (decoded regexes)."""
    if max_len is not None and max_len < min_len:
        return ra.EMPTY
    length_free = min_len == 0 and max_len is None
    parts = list(decoded)
    if len(parts) == 1 and not length_free:
        simple = simple_repeat(parts[0])
        if simple is not None:  # fold the bounds into the repetition: no intersection needed
            cls, lo, hi = simple
            lo, hi = max(lo, min_len), _min_opt(hi, max_len)
            if hi is not None and hi < lo:
                return ra.EMPTY
            parts, length_free = [ra.repeat(cls, lo, hi)], True
    encoded = [encoder.encode(p) for p in parts]
    if not length_free or not encoded:
        encoded.append(ra.repeat(ANY_UNIT, min_len, max_len))
    base, require = encoded[0], encoded[1:]
    return ra.constrained(base, require, [encoder.encode(f) for f in forbid], terminator='"')


def _min_opt(a: int | None, b: int | None) -> int | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)
