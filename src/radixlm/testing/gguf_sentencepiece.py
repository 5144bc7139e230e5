"""A GGUF file's own SentencePiece tokenizer, rebuilt for ``sentencepiece`` to run.

A GGUF ``llama`` tokenizer (``tokenizer.ggml.model``) is a SentencePiece BPE model flattened
into metadata: pieces, scores, types and ``add_space_prefix``. llama.cpp encodes with it by
merging by score, as SentencePiece does. Serializing those fields back into a SentencePiece
``ModelProto`` gives an encoder that is the GGUF's own and independent of transformers' GGUF
conversion, so tests can check that conversion against it.

Only the fields encoding reads are written (wire format by hand: ``protobuf`` is not a
dependency): pieces, ``trainer_spec`` (BPE, byte fallback) and an identity
``normalizer_spec`` (no NFKC, whitespace escaped to ``▁``, extra spaces kept).
"""

from __future__ import annotations

import struct
from typing import Any

from ..fsm.tokens import gguf_tokenizer_metadata as gguf_meta

_BPE = 2  # TrainerSpec.ModelType


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number: int, data: bytes) -> bytes:
    """A length-delimited field (strings, bytes, embedded messages)."""
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _piece(text: str, score: float, kind: int) -> bytes:
    # SentencePiece matches user-defined pieces after escaping spaces to ▁; llama.cpp's
    # converter stores them with real spaces (llama.cpp matches them on raw text)
    if kind == gguf_meta.USER_DEFINED:
        text = text.replace(" ", "\u2581")
    body = _field(1, text.encode("utf-8")) + _varint(2 << 3 | 5) + struct.pack("<f", score)
    return _field(1, body + _int(3, kind))


def sentencepiece_model_proto(meta: gguf_meta.GGUFTokenizerMetadata) -> bytes:
    """A serialized ``ModelProto`` of the GGUF's SentencePiece tokenizer."""
    if meta.model != "llama":
        raise ValueError(f"{meta.path}: tokenizer.ggml.model={meta.model!r} is not a "
                         f"SentencePiece ('llama') tokenizer")
    pieces = b"".join(_piece(text, score, kind) for text, score, kind in zip(
        meta.tokens, meta.scores.tolist(), meta.token_types.tolist(), strict=True))
    trainer = _int(3, _BPE) + _int(4, len(meta.tokens)) + _int(35, 1)  # byte_fallback
    prefix = bool(meta.values.get("ggml.add_space_prefix", True))
    normalizer = _field(1, b"identity") + _int(3, prefix) + _int(4, 0) + _int(5, 1)
    return pieces + _field(2, trainer) + _field(3, normalizer)


def gguf_sentencepiece(meta: gguf_meta.GGUFTokenizerMetadata) -> Any:
    """A ``sentencepiece.SentencePieceProcessor`` of the GGUF's tokenizer (needs
    ``sentencepiece``; ~2 s for Gemma 3's 262,144 pieces)."""
    import sentencepiece

    return sentencepiece.SentencePieceProcessor(model_proto=sentencepiece_model_proto(meta))
