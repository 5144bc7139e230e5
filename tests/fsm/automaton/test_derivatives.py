"""Byte terms: derivatives decide the same language as Python's re; AND/NOT and liveness."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from regex_trees import regex_trees

from radixlm.fsm import GrammarBudgetError
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.liveness import LivenessBudgetError
from radixlm.fsm.regex import tree as ra

LETTERS = "abc"


def _trees():  # noqa: ANN202
    return regex_trees(st.sampled_from(LETTERS).map(ra.lit) | st.just(ra.char_set("ab")), 8)


@settings(max_examples=300, deadline=None)
@given(tree=_trees(), probes=st.lists(st.text(LETTERS, max_size=7), max_size=30))
def test_derivative_language_equals_python_re(tree, probes) -> None:
    builder = TermBuilder()
    term = builder.lower(tree)
    rendered = ra.render(tree) if tree is not ra.EMPTY else None
    for s in probes:
        want = bool(re.fullmatch(rendered, s)) if rendered is not None else False
        assert builder.matches(term, s.encode()) == want, (rendered, s)


def test_terms_are_hash_consed() -> None:
    builder = TermBuilder()

    def build():  # noqa: ANN202
        a, c = builder.byte_set(1 << ord("a")), builder.byte_set(1 << ord("c"))
        return builder.cat(a, builder.rep(builder.alt([c, a]), 0, -1))

    assert build() is build()
    node = ra.seq(ra.lit("ab"), ra.star(ra.lit("c")))
    assert builder.lower(node) is builder.lower(node)  # one node, one (lazy) term
    once = builder.derivative(builder.lower(node), ord("a"))
    assert builder.derivative(once, ord("b")) is builder.derivative(
        builder.derivative(builder.lower(node), ord("a")), ord("b"))


def test_lowering_is_lazy() -> None:
    builder = TermBuilder()
    deep = ra.lit("x")
    for i in range(200):
        deep = ra.alt(ra.seq(ra.lit(f"<{i}>"), deep), ra.lit(f"end{i}"))
    term = builder.lower(deep)
    before = builder.num_terms
    assert builder.matches(term, b"end199")
    assert builder.num_terms - before < 100  # only the entered level was expanded


def test_counted_repetition_is_lazy() -> None:
    builder = TermBuilder()
    term = builder.lower(ra.repeat(ra.char_set("x"), 0, 100_000))
    before = builder.num_terms
    assert builder.matches(term, b"x" * 50)
    assert builder.num_terms - before < 200  # no 100k-state unrolling


def test_intersection_and_complement() -> None:
    builder = TermBuilder()
    letters = builder.lower(ra.star(ra.char_set("ab")))
    two = builder.lower(ra.repeat(ra.char_set("ab"), 2, 2))
    aa = builder.lower(ra.lit("aa"))
    term = builder.and_([letters, two, builder.not_(aa)])
    assert [s for s in ["ab", "ba", "aa", "bb", "a", "abb"] if builder.matches(term, s.encode())] \
        == ["ab", "ba", "bb"]
    assert builder.is_live(term)
    empty = builder.and_([two, builder.lower(ra.lit("abc"))])
    assert not builder.is_live(empty)


def test_liveness_budget_is_enforced() -> None:
    builder = TermBuilder(liveness_budget=5)
    long = builder.lower(ra.repeat(ra.char_set("a"), 50, 50))
    term = builder.and_([long, builder.not_(builder.lower(ra.lit("b")))])
    with pytest.raises(LivenessBudgetError, match="more than 5 states"):
        builder.is_live(term)


def test_long_optional_chains_do_not_recurse_deeply() -> None:
    builder = TermBuilder()
    chain = ra.seq(*(ra.opt(ra.lit(f"<{i}>")) for i in range(3000)), ra.lit("!"))
    term = builder.lower(chain)
    assert builder.matches(term, b"<2999>!")
    assert builder.matches(term, b"<0><1><2>!")


def _dead_window_term(builder: TermBuilder):  # noqa: ANN202
    """[ab]* whose 11th character from the end is both an a and a b: dead, but proving it
    walks every window of the last 11 characters (a few thousand terms)."""
    ab = ra.char_set("ab")
    return builder.lower(ra.constrained(ra.star(ab), [
        ra.seq(ra.star(ab), ra.lit(c), ra.repeat(ab, 10, 10)) for c in "ab"], terminator=""))


def test_liveness_search_stops_at_its_deadline() -> None:
    # the owner's deadline (a compile's, one mask's) is checked while searching: a search
    # that would run to its whole state budget is refused when the work runs out of time
    calls: list[int] = []

    def deadline() -> None:
        calls.append(1)
        if len(calls) == 2:
            raise GrammarBudgetError("time", "1 s", "the owner's deadline")

    builder = TermBuilder()
    builder.deadline = deadline
    with pytest.raises(GrammarBudgetError, match="owner's deadline"):
        builder.is_live(_dead_window_term(builder))
    undisturbed = TermBuilder()
    assert undisturbed.is_live(_dead_window_term(undisturbed)) is False


def test_release_frees_the_terms_without_the_cyclic_collector() -> None:
    import gc

    from radixlm.fsm.automaton.term import Term

    def terms_alive() -> int:
        return sum(type(o) is Term for o in gc.get_objects())  # no proxy asked (torch warns)

    gc.collect()
    gc.disable()  # what is freed below is freed by reference counting
    try:
        before = terms_alive()
        b = TermBuilder()
        star = b.rep(b.alt([b.byte_set(1 << ord("a")), b.cat(b.byte_set(1 << ord("b")),
                                                            b.byte_set(1 << ord("c")))]), 0, -1)
        assert b.matches(star, b"abcabca")  # derivatives lead back to star: a cycle
        assert terms_alive() > before
        b.release()
        assert b.num_terms == 0 and not star.deriv
        del b, star
        assert terms_alive() == before
    finally:
        gc.enable()
