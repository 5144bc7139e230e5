"""Liveness of terms with intersections and complements: exact answers and dead-end marks
(against a plain breadth-first search), and the search's ordering estimate."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.term import ALT_K, AND_K, CAT_K, LAZY_K, NOT_K, REP_K, Term
from radixlm.fsm.regex import tree as ra

# a class of surrogates only: lowers to EMPTY (no UTF-8 spelling), a part that empties a
# sequence, a repeat or an intersection and is dropped from an alternation
NO_SPELLING = ra.Chars(((0xD800, 0xD8FF),))


def _trees(spellable: bool = True):  # noqa: ANN202
    """Regex trees over a few letters, built with the plain constructors (no smart-constructor
    simplification); with ``spellable=False`` also a class no byte string spells."""
    leaf = st.sampled_from("abc").map(ra.lit) | st.sampled_from(["ab", "bc"]).map(ra.lit) | \
        st.just(ra.char_set("ab")) | st.just(ra.EPSILON)
    if not spellable:
        leaf |= st.just(NO_SPELLING)
    return st.recursive(leaf, lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.Seq(tuple(xs))),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: ra.Alt(tuple(xs))),
        st.tuples(inner, st.integers(0, 2), st.integers(0, 3)).map(
            lambda t: ra.Repeat(t[0], min(t[1], t[2]), max(t[1], t[2]))),
        st.tuples(inner, st.lists(inner, max_size=2), st.lists(inner, max_size=2)).map(
            lambda t: ra.Constrained(t[0], tuple(t[1]), tuple(t[2]), "")),
    ), max_leaves=6)


def _reaches_nullable(builder: TermBuilder, term: Term, limit: int = 5000) -> bool:
    """Breadth-first over derivatives (one byte per class), no liveness cache: the oracle."""
    seen, frontier = {term.uid}, [term]
    while frontier and len(seen) < limit:
        nxt = []
        for t in frontier:
            if t.nullable:
                return True
            for mask in builder.classes(t):
                d = builder.derivative(t, (mask & -mask).bit_length() - 1)
                if d.uid not in seen:
                    seen.add(d.uid)
                    nxt.append(d)
        frontier = nxt
    assert len(seen) < limit, "oracle budget"
    return False


@settings(max_examples=200, deadline=None)
@given(a=_trees(), b=_trees(), c=_trees(), negate=st.booleans())
def test_liveness_and_the_dead_ends_it_caches_are_exact(a, b, c, negate) -> None:
    """A search that finds no nullable term marks every term it saw dead: each of them
    really is (checked against a plain breadth-first search), and so are the answers."""
    builder = TermBuilder()
    second = builder.lower(b)
    if negate:
        second = builder.not_(second)
    terms = [builder.and_([builder.lower(a), second]),
             builder.and_([builder.lower(c), builder.not_(builder.lower(a))])]
    for term in terms:
        assert builder.is_live(term) == _reaches_nullable(builder, term)
    dead = [t for t in list(builder._intern.values()) if t.live is False]
    for t in dead:
        assert not _reaches_nullable(builder, t), t


@settings(max_examples=100, deadline=None)
@given(parts=st.lists(st.tuples(_trees(), _trees(), _trees()), min_size=2, max_size=3))
def test_alternations_of_concatenations_are_decided_part_by_part(parts) -> None:
    """An alternation's members are decided structurally (a concatenation is live when every
    part is): the answer, and every term marked live or dead on the way, is exact."""
    builder = TermBuilder()
    members = [builder.cat(builder.and_([builder.lower(a), builder.not_(builder.lower(b))]),
                           builder.lower(c)) for a, b, c in parts]
    term = builder.alt(members)
    assert builder.is_live(term) == _reaches_nullable(builder, term)
    for t in list(builder._intern.values()):
        if t.live is not None:
            assert t.live == _reaches_nullable(builder, t), t


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
@given(tree=_trees(spellable=False))
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
