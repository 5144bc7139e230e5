"""Text-level lookup: the longest suffix of the output's text found in the prompt's (or the
finished outputs') text proposes the text after its latest occurrence."""

from __future__ import annotations

import pytest

from radixlm.runtime.speculative.text_lookup import SharedText, TextLookup

DOC = b"In Oslo there lives a baker named Ines, aged 29."


def test_a_copied_value_continues_from_the_document():
    look = TextLookup(DOC, span=12)
    # the output split " Ines" as "In" "es" after a quote: bytes still match
    assert look.propose(b'{"name": "In') == b"es, aged 29."[:12]


def test_the_longest_suffix_wins_and_its_latest_occurrence():
    look = TextLookup(b"ab X1 ab Y2 cab Z3", span=3)
    assert look.propose(b"zzcab") == b" Z3"  # "cab" beats "ab"
    assert look.propose(b"zzab") == b" Z3"  # "ab": the latest occurrence


def test_nothing_below_the_minimum_and_never_the_corpus_end():
    look = TextLookup(b"hello world", min_bytes=3)
    assert look.propose(b"xyz") == b""
    assert look.propose(b"ld") == b""  # 2 bytes < min_bytes
    assert look.propose(b"world") == b""  # only at the very end: nothing after it


def test_shared_text_by_namespace_when_it_matches_longer():
    shared = SharedText(capacity=64)
    shared.add("ns", b'{"name": "Heidi", "age": 34}')
    look = TextLookup(DOC, span=8)
    assert look.propose(b'"Ines", "age', shared.get("ns")) == b'": 34}\n'
    assert shared.get("other") == b""
    shared.add("ns", b"x" * 100)
    assert len(shared.get("ns")) == 64  # the newest bytes kept


def test_bad_window_is_refused():
    with pytest.raises(ValueError):
        TextLookup(b"", min_bytes=0)


def test_a_copied_word_ends_as_the_finished_outputs_went_on():
    shared = SharedText()
    shared.add("ns", b'{"name": "Heidi", "age": 34}')
    look = TextLookup(DOC, span=16)
    # "In" -> "es" from the document, then what followed the skeleton '{"name": "' (past
    # "Heidi") in the finished output
    assert look.propose(b'{"name": "In', shared.get("ns")) == b'es", "age": 34}\n'
    # not inside a word: the longest match as it is
    assert look.propose(b'"age": ', shared.get("ns")) == b"34}\n"


def test_a_caller_can_ask_for_a_longer_match():
    look = TextLookup(b"ab X1 ab Y2 cab Z3", span=3)
    assert look.propose(b"zzcab", least=4) == b""
    assert look.propose(b"zzcab", least=3) == b" Z3"
