"""Code-point ranges as UTF-8 byte-range sequences (what a byte-level automaton needs).

``utf8_sequences(lo, hi)`` returns sequences of byte ranges such that the byte strings they
match are exactly the UTF-8 encodings of the code points in ``[lo, hi]`` (surrogates excluded:
they have no UTF-8 encoding).
"""

from __future__ import annotations

ByteRange = tuple[int, int]

_LENGTH_BOUNDARIES = (0x7F, 0x7FF, 0xFFFF)


def _encode(cp: int) -> bytes:
    return chr(cp).encode("utf-8")


def utf8_sequences(lo: int, hi: int) -> list[tuple[ByteRange, ...]]:
    """Byte-range sequences matching the UTF-8 encodings of code points ``lo..hi``."""
    out: list[tuple[ByteRange, ...]] = []
    stack = []
    # Surrogates cannot be encoded; cut them out first.
    if lo <= 0xDFFF and hi >= 0xD800:
        if hi > 0xDFFF:
            stack.append((0xE000, hi))
        if lo < 0xD800:
            stack.append((lo, 0xD7FF))
    else:
        stack.append((lo, hi))
    while stack:
        start, end = stack.pop()
        if start > end:
            continue
        split = _split_on_length(start, end) or _split_on_prefix(start, end)
        if split is not None:
            stack.extend(reversed(split))
            continue
        first, last = _encode(start), _encode(end)
        out.append(tuple(zip(first, last, strict=True)))
    out.sort()
    return out


def _split_on_length(start: int, end: int) -> list[tuple[int, int]] | None:
    """Split a range that spans encodings of different lengths."""
    for boundary in _LENGTH_BOUNDARIES:
        if start <= boundary < end:
            return [(start, boundary), (boundary + 1, end)]
    return None


def _split_on_prefix(start: int, end: int) -> list[tuple[int, int]] | None:
    """Split until every byte position of the encodings covers one contiguous byte range."""
    if end <= 0x7F:
        return None
    for i in range(1, 4):
        low_bits = (1 << (6 * i)) - 1
        if (start & ~low_bits) != (end & ~low_bits):
            if start & low_bits:
                return [(start, start | low_bits), ((start | low_bits) + 1, end)]
            if (end & low_bits) != low_bits:
                return [(start, (end & ~low_bits) - 1), (end & ~low_bits, end)]
    return None
