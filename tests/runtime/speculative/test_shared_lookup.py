"""Cross-request lookup: finished outputs propose continuations, per namespace, bounded."""

from __future__ import annotations

from radixlm.runtime.speculative.shared_lookup import SharedLookup


def test_a_finished_output_proposes_what_followed():
    look = SharedLookup(1, 3, span=4)
    look.add("", [1, 2, 3, 10, 11, 12, 13, 14], prompt_len=3)  # output 10..14
    assert look.propose("", [9, 9, 10, 11], 3) == [12, 13, 14]
    assert look.propose("", [2, 3], 2) == [10, 11], "the prompt's tail gives the first tokens"
    assert look.propose("", [7], 2) == []
    assert look.propose("", [10, 11], 0) == []


def test_namespaces_never_share():
    look = SharedLookup(1, 2, span=2)
    look.add("alice", [1, 5, 6, 7], prompt_len=1)
    assert look.propose("bob", [5], 2) == []
    assert look.propose("alice", [5], 2) == [6, 7]


def test_capacity_drops_the_oldest():
    look = SharedLookup(2, 2, span=1, capacity=3)
    look.add("", [1, 2, 3, 4, 5, 6, 7], prompt_len=1)
    assert len(look) == 3
    assert look.propose("", [5, 6], 1) == [7] and look.propose("", [1, 2], 1) == []
