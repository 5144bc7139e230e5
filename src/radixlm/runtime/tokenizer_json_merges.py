"""The BPE merges of a ``tokenizer.json``, rewritten in its bytes before ``tokenizers`` parses it.

``tokenizers`` (0.23) reads a BPE model's merges either as pairs (``[["Ġ", "t"], ...]``,
what it writes) or as the legacy strings (``["Ġ t", ...]``, split at their one space), and
its parse of the pairs takes far more transient memory (deserialized as generic values
first, it seems): loading SmolLM2's tokenizer (48,900 merges, a light tokenizer in a fresh
process) peaks at +41 MiB of RSS from its pairs and at +28 MiB from the same merges rewritten
as strings here (the rewrite's own Python lists included; +35 ms of CPU). The parsed
tokenizer is the same (the tests compare its serialization with transformers' tokenizer's).

* :func:`with_legacy_merges`: the merges as legacy strings, where every token of every pair
  is free of spaces (a token with a space cannot be written so); else the bytes unchanged.
* :func:`without_merges`: the merges emptied (a tokenizer that only decodes).

Imports the standard library only.
"""

from __future__ import annotations

import json


def merges_span(data: bytes) -> tuple[int, int] | None:
    """Byte offsets ``(start, end)`` of the BPE model's merges array (its ``[`` to past its
    ``]``; the only array-valued ``"merges"`` key of the format, a vocabulary entry
    ``"merges"`` has a number), None if there is none."""
    at = max(data.rfind(b'"merges":['), data.rfind(b'"merges": ['))
    if at < 0:
        return None
    start = data.index(b"[", at)
    last = data.rfind(b"]")
    if last > start and not data[last + 1:].strip().strip(b"}").strip():
        return start, last + 1  # the model's last key (as tokenizers writes it): no parse
    text = data.decode("utf-8")
    start_char = text.index("[", text.rfind('"merges"'))
    _, end_char = json.JSONDecoder().raw_decode(text, start_char)
    return len(text[:start_char].encode("utf-8")), len(text[:end_char].encode("utf-8"))


def without_merges(data: bytes) -> bytes:
    """``tokenizer.json`` with the BPE model's merges list emptied."""
    span = merges_span(data)
    if span is None:
        return data
    return data[:span[0]] + b"[]" + data[span[1]:]


def with_legacy_merges(data: bytes) -> bytes:
    """``tokenizer.json`` with its merge pairs written as legacy ``"a b"`` strings, in the same
    order; ``data`` itself where there are none, where any element is not a pair of strings,
    or where a token holds a space (legacy strings split at their one space)."""
    span = merges_span(data)
    if span is None:
        return data
    start, end = span
    merges = json.loads(data[start:end])  # ~8 MiB of lists for 49k merges, gone before the
    if not merges or not all(_spaceless_pair(pair) for pair in merges):  # Rust parse peaks
        return data
    legacy = json.dumps([f"{a} {b}" for a, b in merges], ensure_ascii=False).encode("utf-8")
    return data[:start] + legacy + data[end:]


def _spaceless_pair(pair: object) -> bool:
    return type(pair) is list and len(pair) == 2 and all(  # noqa: E721 (exact JSON types)
        type(token) is str and " " not in token for token in pair)  # noqa: E721
