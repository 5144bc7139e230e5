"""Hypothesis strategy for regex trees built with the smart constructors (shared by tests)."""

from __future__ import annotations

from hypothesis import strategies as st

from radixlm.fsm.regex import tree as ra


def regex_trees(leaf: st.SearchStrategy[ra.Node], max_leaves: int) -> st.SearchStrategy:
    """Sequences, alternations, counted and starred repeats of ``leaf`` trees."""
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.seq(*xs)),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.alt(*xs)),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 4)).map(
            lambda t: ra.repeat(t[0], min(t[1], t[2]), max(t[1], t[2]))),
        inner.map(ra.star),
    ), max_leaves=max_leaves)
