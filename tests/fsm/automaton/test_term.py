"""Byte partitions (term.py): the indexed refinement gives refine's parts in refine's order."""

from __future__ import annotations

import random

from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.term import FULL_MASK, part_index, refine, refine_indexed


def _pairwise_refine(p: tuple[int, ...], q: tuple[int, ...]) -> tuple[int, ...]:
    """The definition: every non-empty x & y, x in p outer, y in q inner."""
    if len(p) == 1:
        return q
    if len(q) == 1:
        return p
    return tuple(z for x in p for y in q if (z := x & y))


def _random_partition(rng: random.Random) -> tuple[int, ...]:
    cuts = [0, *sorted(rng.sample(range(1, 256), rng.randint(0, 30))), 256]
    parts: list[int] = []
    for lo, hi in zip(cuts, cuts[1:]):
        run = ((1 << hi) - 1) ^ ((1 << lo) - 1)
        if parts and rng.random() < 0.3:  # parts that are not intervals
            parts[rng.randrange(len(parts))] |= run
        else:
            parts.append(run)
    rng.shuffle(parts)
    return tuple(parts)


def test_refine_and_refine_indexed_match_the_definition() -> None:
    rng = random.Random(0)
    for _ in range(3000):
        p, q = _random_partition(rng), _random_partition(rng)
        want = _pairwise_refine(p, q)
        assert refine(p, q) == want
        assert refine_indexed(p, q, part_index(q)) == want
        assert refine(p, p) == p == refine_indexed(p, p, part_index(p))
    assert refine((FULL_MASK,), (1, FULL_MASK ^ 1)) == (1, FULL_MASK ^ 1)


def test_part_index_names_each_bytes_part() -> None:
    q = (0b1010, FULL_MASK ^ 0b1010)
    index = part_index(q)
    assert index[1] == index[3] == 0
    assert index[0] == index[2] == index[255] == 1


def test_classes_of_an_alternation_are_the_members_common_refinement() -> None:
    b = TermBuilder()
    a, c, d = b.byte_set(0b0110), b.byte_set(0b0011), b.byte_set(0b0110)
    alt1 = b.alt([b.cat(a, b.byte_set(1)), b.cat(c, b.byte_set(2))])
    want = _pairwise_refine(_pairwise_refine((FULL_MASK,), b.classes(alt1.args[0])),
                            b.classes(alt1.args[1]))
    assert b.classes(alt1) == want
    # a second term whose members share those partitions gets the memoised fold, the same
    alt2 = b.alt([b.cat(d, b.byte_set(4)), b.cat(c, b.byte_set(8))])
    assert b.classes(alt2) == want
