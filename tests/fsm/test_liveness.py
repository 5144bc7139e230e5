"""The liveness search's ordering estimate: read off lazy terms, equal to the expanded one."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import regex_ast as ra
from radixlm.fsm.derivatives import TermBuilder
from radixlm.fsm.term import ALT_K, AND_K, CAT_K, LAZY_K, NOT_K, REP_K, Term

# a class of surrogates only: lowers to EMPTY (no UTF-8 spelling), a part that empties a
# sequence, a repeat or an intersection and is dropped from an alternation
NO_SPELLING = ra.Chars(((0xD800, 0xD8FF),))


def _trees():  # noqa: ANN202
    leaf = st.sampled_from("abc").map(ra.lit) | st.sampled_from(["ab", "bc"]).map(ra.lit) | \
        st.just(ra.char_set("ab")) | st.just(NO_SPELLING) | st.just(ra.EPSILON)
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.Seq(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.Alt(tuple(xs))),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 3)).map(
            lambda t: ra.Repeat(t[0], min(t[1], t[2]), max(t[1], t[2]))),
        st.tuples(inner, st.lists(inner, max_size=2), st.lists(inner, max_size=2)).map(
            lambda t: ra.Constrained(t[0], tuple(t[1]), tuple(t[2]), "")),
    ), max_leaves=10)


def _expand_everything(builder: TermBuilder, root: Term) -> None:
    """Force every lazy term reachable from ``root``: estimates then come from the expanded
    terms, as they did before lazy terms were estimated from their regex nodes."""
    stack, seen = [root], set()
    while stack:
        t = stack.pop()
        if t.uid in seen:
            continue
        seen.add(t.uid)
        if t.kind == LAZY_K:
            stack.append(builder.force(t))
        elif t.kind in (CAT_K, ALT_K, AND_K):
            stack.extend(t.args)
        elif t.kind in (REP_K, NOT_K):
            stack.append(t.args[0])


@settings(max_examples=400, deadline=None)
@given(tree=_trees())
def test_lazy_estimate_equals_the_expanded_terms_estimate(tree) -> None:
    lazy, expanded = TermBuilder(), TermBuilder()
    lazy_root, expanded_root = lazy.lower(tree), expanded.lower(tree)
    _expand_everything(expanded, expanded_root)
    assert lazy.search_estimate(lazy_root) == expanded.search_estimate(expanded_root)
    assert lazy.is_live(lazy_root) == expanded.is_live(expanded_root)


def test_estimating_expands_no_sequence_alternation_or_repeat() -> None:
    builder = TermBuilder()
    tree = ra.alt(*(ra.seq(ra.lit(f"<{i}>"), ra.repeat(ra.lit("x"), 2, 5)) for i in range(50)))
    root = builder.lower(tree)
    assert builder.search_estimate(root) == 3 + 2  # "<0>" and "xx"
    assert root.forced is None  # read off the regex nodes
