"""Bytes per token id from tokenizer files that are not Hugging Face tokenizers.

Three formats (Hugging Face tokenizers, GGUF ones included, go through
:func:`radixlm.fsm.tokens.vocabulary.tokenizer_token_bytes`):

- Mistral's *tekken* JSON (tiktoken-style byte-level BPE): ids below ``num_special_tokens``
  are control tokens (None); id ``num_special_tokens + rank`` is the base64 ``token_bytes`` of
  that rank, for ranks that fit the configured vocabulary size.
- A SentencePiece model: control, unknown and unused pieces are None, byte-fallback pieces
  (``<0x41>``) are that byte, and ``▁`` in a normal piece is a space.
- A GGUF file's ``tokenizer.ggml.*`` metadata (SentencePiece ``llama`` or byte-level ``gpt2``
  models), as llama.cpp reads it: control, unknown and unused tokens are None, byte tokens
  their byte, user-defined tokens their raw text, normal tokens decoded per the model.

Nothing here imports the tokenizer libraries: the caller passes the parsed file or processor.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any, Protocol

from . import gguf_tokenizer_metadata as gguf_meta
from .vocabulary import byte_level_bytes, sentencepiece_piece_bytes


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


def gguf_token_bytes(meta: gguf_meta.GGUFTokenizerMetadata) -> list[bytes | None]:
    """Bytes per id of a GGUF file's tokenizer metadata (see the module docstring)."""
    if meta.model not in ("llama", "gpt2"):
        raise ValueError(f"{meta.path}: tokenizer.ggml.model={meta.model!r} is not supported "
                         f"(expected 'llama' or 'gpt2')")
    normal = sentencepiece_piece_bytes if meta.model == "llama" else \
        (lambda token: byte_level_bytes(token) or token.encode("utf-8"))
    out: list[bytes | None] = []
    for token, kind in zip(meta.tokens, meta.token_types.tolist(), strict=True):
        if kind in (gguf_meta.CONTROL, gguf_meta.UNKNOWN, gguf_meta.UNUSED):
            out.append(None)
        elif kind == gguf_meta.USER_DEFINED:
            out.append(token.encode("utf-8") or None)
        elif kind == gguf_meta.BYTE:
            out.append(sentencepiece_piece_bytes(token) or None)
        else:
            out.append(normal(token) or None)
    return out
