"""Regex trees: smart constructors, range algebra and rendering (Python re agrees)."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.regex import tree as ra

ranges = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 300)), max_size=5)


@settings(max_examples=200, deadline=None)
@given(a=ranges, b=ranges, probe=st.integers(0, 310))
def test_range_algebra(a, b, probe) -> None:
    def member(rs):
        return any(lo <= probe <= hi for lo, hi in rs)

    assert member(ra.char_ranges(a)) == member([r for r in a if r[0] <= r[1]])
    assert member(ra.negate_ranges(a)) != member(ra.char_ranges(a))
    assert member(ra.intersect_ranges(ra.char_ranges(a), ra.char_ranges(b))) == \
        (member(ra.char_ranges(a)) and member(ra.char_ranges(b)))
    assert member(ra.subtract_ranges(ra.char_ranges(a), ra.char_ranges(b))) == \
        (member(ra.char_ranges(a)) and not member(ra.char_ranges(b)))


def test_smart_constructors_simplify() -> None:
    a = ra.lit("a")
    assert ra.seq(a, ra.EMPTY) is ra.EMPTY
    assert ra.seq(ra.EPSILON, a) is a
    assert ra.alt(a, ra.EMPTY, a) is a
    assert ra.repeat(a, 1, 1) is a
    assert ra.repeat(ra.EMPTY, 0, 3) is ra.EPSILON
    assert ra.repeat(ra.EMPTY, 1, 3) is ra.EMPTY
    with pytest.raises(ValueError, match="lo <= hi"):
        ra.repeat(a, 3, 2)


@pytest.mark.parametrize("text", ["a.b", "[x]", "(y)|z", "a\\b", "\n\t\x7f", "é∑😀", "{1,2}",
                                  "^$*+?", "a-b&c~d"])
def test_literals_render_exactly(text: str) -> None:
    rendered = ra.render(ra.lit(text))
    assert re.fullmatch(rendered, text)
    assert not re.fullmatch(rendered, text + "x")


@pytest.mark.parametrize("chars", ["-]^\\", "[&~|", "aeiou", "\x00\x1f"])
def test_classes_render_exactly(chars: str) -> None:
    cls = ra.render(ra.char_set(chars))
    for c in map(chr, range(0, 256)):
        assert bool(re.fullmatch(cls, c)) == (c in chars), (cls, c)


def test_quantifiers_and_grouping() -> None:
    node = ra.seq(ra.repeat(ra.lit("ab"), 2, 3), ra.opt(ra.alt(ra.lit("x"), ra.lit("yz"))))
    rendered = ra.render(node)
    for s, ok in [("abab", True), ("ababab", True), ("ababx", True), ("ababyz", True),
                  ("ab", False), ("abababab", False), ("ababy", False)]:
        assert bool(re.fullmatch(rendered, s)) == ok, (rendered, s)


def test_constrained_renders_as_lookaheads() -> None:
    node = ra.seq(ra.lit('"'), ra.constrained(ra.star(ra.char_set("ab")),
                                              require=[ra.repeat(ra.char_set("ab"), 2, 2)],
                                              forbid=[ra.lit("aa")]), ra.lit('"'))
    rendered = ra.render(node)
    assert ra.uses_lookaround(node)
    assert [s for s in ['"ab"', '"ba"', '"aa"', '"a"', '"bbb"'] if re.fullmatch(rendered, s)] \
        == ['"ab"', '"ba"']


def test_render_size_limit() -> None:
    big = ra.alt(*(ra.lit(f"value{i}") for i in range(1000)))
    with pytest.raises(ra.RenderTooLargeError, match="exceeds 100 characters"):
        ra.render(big, max_chars=100)
