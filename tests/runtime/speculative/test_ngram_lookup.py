"""Prompt lookup: the longest earlier suffix match, its latest occurrence, incremental and
rebuilt when the sequence shrinks."""

from __future__ import annotations

import pytest

from radixlm.runtime.speculative.ngram_lookup import NgramLookup


def test_longest_suffix_wins_and_proposes_what_followed():
    ids = [1, 2, 3, 4, 5, 9, 3, 4, 6, 7, 1, 2, 3, 4]
    look = NgramLookup(1, 4)
    # suffix [1, 2, 3, 4] occurred at the start: 5, 9, 3 followed
    assert look.propose(ids, 3) == [5, 9, 3]
    assert NgramLookup(1, 1).propose(ids, 2) == [6, 7], "[4]: its latest occurrence"


def test_no_match_and_zero_want():
    look = NgramLookup(2, 3)
    assert look.propose([1, 2, 3, 4], 4) == []
    assert look.propose([1, 2, 1, 2], 0) == []


def test_incremental_growth_matches_a_fresh_index():
    ids = [5, 6, 7, 8, 5, 6]
    look = NgramLookup(1, 3)
    assert look.propose(ids, 2) == [7, 8]
    ids += [7, 8, 9, 5, 6, 7]
    assert look.propose(ids, 3) == NgramLookup(1, 3).propose(ids, 3) == [8, 9, 5]


def test_tail_extends_the_context_and_shrinking_rebuilds():
    ids = [1, 2, 3, 4, 5, 1, 2]
    look = NgramLookup(1, 3)
    assert look.propose(ids, 2, tail=[3]) == [4, 5], "suffix [1, 2] + drafted [3]"
    look.propose(ids + [8, 8, 8], 1)
    assert look.propose(ids[:5], 2) == NgramLookup(1, 3).propose(ids[:5], 2)


def test_a_run_of_one_token_proposes_it_again():
    assert NgramLookup(1, 4).propose([3, 7, 7, 7], 4) == [7]


def test_window_sizes_are_checked():
    with pytest.raises(ValueError):
        NgramLookup(3, 2)
