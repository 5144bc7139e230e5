"""UTF-8 byte-range sequences cover exactly the encodings of a code-point range."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm.regex.utf8 import utf8_sequences

code_points = st.integers(0, 0x10FFFF).filter(lambda c: not 0xD800 <= c <= 0xDFFF)


def _matches(seqs, data: bytes) -> bool:
    return any(len(s) == len(data) and all(lo <= b <= hi for b, (lo, hi) in zip(data, s))
               for s in seqs)


@settings(max_examples=200, deadline=None)
@given(lo=st.integers(0, 0x10FFFF), span=st.integers(0, 0x10FFFF), probe=code_points)
def test_sequences_match_exactly_the_range(lo: int, span: int, probe: int) -> None:
    hi = min(0x10FFFF, lo + span)
    seqs = utf8_sequences(lo, hi)
    assert _matches(seqs, chr(probe).encode()) == (lo <= probe <= hi)
    for edge in (lo, hi, lo - 1, hi + 1):
        if 0 <= edge <= 0x10FFFF and not 0xD800 <= edge <= 0xDFFF:
            assert _matches(seqs, chr(edge).encode()) == (lo <= edge <= hi)


@settings(max_examples=100, deadline=None)
@given(lo=st.integers(0, 0x10FFFF), span=st.integers(0, 5000), data=st.data())
def test_every_matched_byte_string_is_valid_utf8_in_range(lo: int, span: int, data) -> None:
    hi = min(0x10FFFF, lo + span)
    for seq in utf8_sequences(lo, hi):
        raw = bytes(data.draw(st.integers(a, b)) for a, b in seq)
        assert lo <= ord(raw.decode("utf-8")) <= hi


def test_surrogates_have_no_encoding() -> None:
    assert utf8_sequences(0xD800, 0xDFFF) == []
    assert utf8_sequences(0, 0x10FFFF)[0] == ((0, 0x7F),)
