"""Bytes per token id from tokenizer files that are not Hugging Face tokenizers.

Two formats (Hugging Face tokenizers, GGUF ones included, go through
:func:`radixlm.fsm.tokens.vocabulary.tokenizer_token_bytes`):

- Mistral's *tekken* JSON (tiktoken-style byte-level BPE): ids below ``num_special_tokens``
  are control tokens (None); id ``num_special_tokens + rank`` is the base64 ``token_bytes`` of
  that rank, for ranks that fit the configured vocabulary size.
- A SentencePiece model: control, unknown and unused pieces are None, byte-fallback pieces
  (``<0x41>``) are that byte, and ``▁`` in a normal piece is a space.

Nothing here imports the tokenizer libraries: the caller passes the parsed file or processor.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Protocol

from .vocabulary import sentencepiece_piece_bytes


def tekken_token_bytes(source: Path | dict[str, Any]) -> list[bytes | None]:
    """Bytes per id of a tekken tokenizer file (a path, or its parsed JSON).

    The length is the file's ``default_vocab_size``; specials (ids under
    ``default_num_special_tokens``) are None.
    """
    data = json.loads(Path(source).read_text()) if not isinstance(source, dict) else source
    try:
        config = data["config"]
        size = int(config["default_vocab_size"])
        specials = int(config["default_num_special_tokens"])
        ranks = data["vocab"]
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a tekken tokenizer file (missing {exc}); expected 'config' "
                         f"with default_vocab_size/default_num_special_tokens and 'vocab'"
                         ) from None
    if not 0 <= specials <= size:
        raise ValueError(f"tekken: {specials} special tokens do not fit {size} ids")
    out: list[bytes | None] = [None] * size
    for entry in ranks[: size - specials]:
        out[specials + int(entry["rank"])] = base64.b64decode(entry["token_bytes"]) or None
    return out


class SentencePieceLike(Protocol):
    """The part of ``sentencepiece.SentencePieceProcessor`` read here."""

    def get_piece_size(self) -> int: ...
    def id_to_piece(self, id: int) -> str: ...  # noqa: A002
    def is_control(self, id: int) -> bool: ...  # noqa: A002
    def is_unknown(self, id: int) -> bool: ...  # noqa: A002
    def is_unused(self, id: int) -> bool: ...  # noqa: A002


def sentencepiece_token_bytes(processor: SentencePieceLike) -> list[bytes | None]:
    """Bytes per id of a SentencePiece model (control/unknown/unused pieces: None)."""
    out: list[bytes | None] = []
    for tid in range(processor.get_piece_size()):
        if processor.is_control(tid) or processor.is_unknown(tid) or processor.is_unused(tid):
            out.append(None)
        else:
            out.append(sentencepiece_piece_bytes(processor.id_to_piece(tid)) or None)
    return out
