"""A GGUF file's tokenizer metadata, read without the tensors (on the real files, against
transformers' tokenizers: ``test_real_vocabularies.py`` and ``test_gemma_vocabulary.py``)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from radixlm.fsm.tokens import gguf_tokenizer_metadata as gguf_meta
from radixlm.fsm.tokens.vocabulary_sources import gguf_token_bytes


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _kv(key: str, kind: int, payload: bytes) -> bytes:
    return _string(key) + struct.pack("<I", kind) + payload


def _write(path: Path) -> None:
    """A GGUF v3 header with a SentencePiece tokenizer of five tokens and no tensors."""
    tokens = ["<unk>", "<0x41>", "\u2581hi", "\n\n", "<unused0>"]
    kvs = [_kv("general.architecture", 8, _string("llama")),
           _kv("tokenizer.ggml.model", 8, _string("llama")),
           _kv("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, len(tokens))
               + b"".join(map(_string, tokens))),
           _kv("tokenizer.ggml.scores", 9, struct.pack("<IQ5f", 6, 5, 0, 0, -1.5, 0, 0)),
           _kv("tokenizer.ggml.token_type", 9, struct.pack("<IQ5i", 5, 5, 2, 6, 1, 4, 5)),
           _kv("tokenizer.ggml.eos_token_id", 4, struct.pack("<I", 3)),
           _kv("general.flags", 9, struct.pack("<IQ2?", 7, 2, True, False))]
    path.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs)) + b"".join(kvs))


def test_reads_the_tokenizer_keys_only(tmp_path: Path) -> None:
    _write(tmp_path / "t.gguf")
    meta = gguf_meta.read_tokenizer_metadata(tmp_path / "t.gguf")
    assert meta.model == "llama" and meta.tokens[2] == "\u2581hi"
    assert meta.scores.dtype == np.float32 and meta.scores[2] == -1.5
    assert meta.token_types.tolist() == [2, 6, 1, 4, 5]
    assert meta.token_id("eos") == 3 and meta.token_id("bos") is None
    assert set(meta.values) == {"ggml.model", "ggml.tokens", "ggml.scores",
                                "ggml.token_type", "ggml.eos_token_id"}
    assert gguf_token_bytes(meta) == [None, b"A", b" hi", b"\n\n", None]


def test_not_a_gguf_file(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"NOPE" + bytes(40))
    with pytest.raises(ValueError, match="not a GGUF file"):
        gguf_meta.read_tokenizer_metadata(path)
