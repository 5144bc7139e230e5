"""A BPE ``tokenizer.json`` built with its model read from files: the same tokenizer, a lower
load peak.

``tokenizers`` (0.23) parses a whole ``tokenizer.json`` with its model buffered as generic
values first: SmolLM2's (49,152 tokens, 48,900 merges, the merges as legacy strings) peaks at
+27 MiB of RSS and keeps +17. :func:`load_bpe_from_files` parses the file with the model's
vocabulary and merges emptied, and builds the model with ``BPE.from_file`` from the
vocabulary's own bytes (``vocab.json``) and the merges as text lines (``merges.txt``), with
the file's BPE options: +17 MiB at the peak, +13 kept (the peak of the process that holds an
Engine, issue 40). Its serialization is the file's parse's, byte for byte (tests compare).

Imports the standard library only (``tokenizers`` when called).
"""

from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import IO, Any

from .tokenizer_json_merges import merges_span

# the BPE model's options (``tokenizers``' BPE serialization), passed on to BPE.from_file
BPE_OPTIONS = frozenset({"dropout", "unk_token", "continuing_subword_prefix",
                         "end_of_word_suffix", "fuse_unk", "byte_fallback", "ignore_merges"})
# characters a merge's token may not hold in merges.txt (its line split at the one space)
_LINE_BREAKERS = (" ", "\n", "\r")
_MODEL_KEY = re.compile(rb'"model"\s*:\s*\{')
_VOCAB_KEY = re.compile(rb'"vocab"\s*:\s*\{')
_STRING = rb'("(?:[^"\\]|\\.)*")'
# one merges element, a pair of strings or one string, and the comma or bracket after it
_ELEMENT = re.compile(rb"\s*(?:\[\s*" + _STRING + rb"\s*,\s*" + _STRING + rb"\s*\]|" + _STRING +
                      rb")\s*(,|\])")


def vocab_span(data: bytes, merges_start: int) -> tuple[int, int] | None:
    """Byte offsets ``(start, end)`` of the BPE model's vocabulary object where it is the key
    right before ``"merges"`` (as ``tokenizers`` writes it; ``merges_start``: the merges
    array's ``[``), else None. The model's is the first ``"vocab": {`` after ``"model": {``
    (the keys before it hold scalars; a token ``"vocab"`` only comes inside it)."""
    key = data.rfind(b'"merges"', 0, merges_start)
    head = data[:key].rstrip()
    if key < 0 or not head.endswith(b","):
        return None
    end = len(head[:-1].rstrip())
    model = _MODEL_KEY.search(data)
    vocab = _VOCAB_KEY.search(data, model.end()) if model is not None else None
    if vocab is None or vocab.end() >= end or data[end - 1:end] != b"}":
        return None
    return vocab.end() - 1, end


def _token(quoted: bytes) -> str:
    """A JSON string's text (``quoted`` with its quotes)."""
    return quoted[1:-1].decode("utf-8") if b"\\" not in quoted else json.loads(quoted)


def _merge_line(parts: list[str]) -> str | None:
    if len(parts) != 2 or any(c in token for token in parts for c in _LINE_BREAKERS):
        return None
    line = f"{parts[0]} {parts[1]}"
    return None if line.startswith("#version") else line


def write_merge_lines(array: bytes, out: IO[str]) -> bool:
    """Write the merges array ``array`` (its bytes, ``[`` to ``]``) to ``out`` as
    ``merges.txt`` lines (``"a b"``), one element at a time (no list of them all: the load's
    peak); False (``out`` then holds a part) where the array is empty, an element is not a
    pair of strings or one legacy ``"a b"`` string, a token holds a space or a line break, or
    a line would read as the file's ``#version`` header."""
    pos = array.index(b"[") + 1
    if not array[pos:].strip().startswith(b"[") and not array[pos:].strip().startswith(b'"'):
        return False  # empty (or not strings and pairs)
    while True:
        m = _ELEMENT.match(array, pos)
        if m is None:
            return False
        pair, legacy = (m.group(1), m.group(2)), m.group(3)
        parts = _token(legacy).split(" ") if legacy is not None else [_token(t) for t in pair]
        line = _merge_line(parts)
        if line is None:
            return False
        out.write(line + "\n")
        pos = m.end()
        if m.group(4) == b"]":
            return not array[pos:].strip()


def load_bpe_from_files(data: bytes) -> Any | None:
    """``Tokenizer.from_buffer(data)``'s tokenizer (a BPE ``tokenizer.json``'s bytes), built
    with its model read from files (module docstring); None where the file is not a BPE model
    written as ``tokenizers`` writes it or its merges cannot be lines (load it whole then)."""
    span = merges_span(data)
    if span is None:
        return None
    merges_start, merges_end = span
    vspan = vocab_span(data, merges_start)
    if vspan is None:
        return None
    vocab_start, vocab_end = vspan
    shell = (data[:vocab_start] + b"{}" + data[vocab_end:merges_start] + b"[]" +
             data[merges_end:])
    try:
        doc = json.loads(shell)
        model, added = doc.get("model"), doc.get("added_tokens") or []
        added_ids = {int(token["id"]): token["content"] for token in added}
    except (ValueError, AttributeError, KeyError, TypeError):
        return None
    if not isinstance(model, dict) or model.get("type") != "BPE" or model.get("vocab") != {} \
            or model.get("merges") != [] or set(model) - BPE_OPTIONS - {"type", "vocab", "merges"}:
        return None
    from tokenizers import Tokenizer, models

    options = {k: v for k, v in model.items() if k in BPE_OPTIONS and v is not None}
    with tempfile.TemporaryDirectory(prefix="radixlm-bpe-") as folder:
        vocab_file, merges_file = Path(folder) / "vocab.json", Path(folder) / "merges.txt"
        vocab_file.write_bytes(data[vocab_start:vocab_end])
        with merges_file.open("w", encoding="utf-8", newline="\n") as out:
            if not write_merge_lines(data[merges_start:merges_end], out):
                return None
        try:
            bpe = models.BPE.from_file(str(vocab_file), str(merges_file), **options)
        except Exception:  # noqa: BLE001 - a vocabulary BPE.from_file refuses: the whole parse
            return None
    tokenizer = Tokenizer.from_buffer(shell)
    tokenizer.model = bpe
    # the shell's parse numbers its added tokens against an empty vocabulary, ignoring the
    # file's ids: it is the same tokenizer only where they come out the same (SmolLM2's
    # specials, ids 0-16, do); else the whole parse
    got = {i: t.content for i, t in tokenizer.get_added_tokens_decoder().items()}
    return tokenizer if got == added_ids else None
