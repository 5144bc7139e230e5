"""Gemma 3's 262,144-token SentencePiece vocabulary, from the Gemma 3 270M GGUF.

transformers' GGUF conversion (the tokenizer the runtime and ``load_vocabulary("gemma3")``
use) against the GGUF's own metadata: the same bytes for every token id, the same encoding as
the GGUF's SentencePiece model run by ``sentencepiece``, BOS/EOS ids, byte fallback and ``▁``.
Skipped, naming the package, where the file is not installed.
"""

from __future__ import annotations

import random
from collections.abc import Callable

import numpy as np
import pytest

from radixlm.fsm.tokens import gguf_tokenizer_metadata as gguf_meta
from radixlm.testing.real_vocabularies import RealVocabulary

TEXTS = ['{"name": "Zoë", "tags": ["a", "b"], "n": -12.5e3}', "  indented\n\tline",
         "日本語のテキスト 😀", "Hello world", " Hello", "a  b   c    d", "<table><tr>x</tr>",
         "\x01\x02 \u0378 \U0010fffd", "       \n\n\n   \t\t", '{"k":null,"t":true}']
ALPHABET = " \n\t{}[]\":,.-0123456789abcdefXYZéüß日本😀\\<>/"


@pytest.fixture(scope="module")
def gemma(load_real: Callable[[str], RealVocabulary]) -> RealVocabulary:
    return load_real("gemma3")


@pytest.fixture(scope="module")
def meta(gemma: RealVocabulary) -> gguf_meta.GGUFTokenizerMetadata:
    from radixlm.default_model import gemma3_gguf_path

    return gguf_meta.read_tokenizer_metadata(gemma3_gguf_path())


def _samples() -> list[str]:
    rnd = random.Random(0)  # many runs of spaces, tabs and newlines: user-defined pieces
    return TEXTS + ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(1, 60)))
                    for _ in range(400)]


def test_metadata(meta: gguf_meta.GGUFTokenizerMetadata) -> None:
    assert meta.model == "llama" and len(meta.tokens) == 262144
    assert (meta.token_id("bos"), meta.token_id("eos"), meta.token_id("padding")) == (2, 1, 0)
    assert meta.values["ggml.add_bos_token"] and not meta.values["ggml.add_space_prefix"]
    kinds = dict(zip(*np.unique(meta.token_types, return_counts=True), strict=True))
    assert kinds[gguf_meta.BYTE] == 256 and kinds[gguf_meta.CONTROL] > 6000


def test_control_tokens_are_never_text(gemma: RealVocabulary,
                                       meta: gguf_meta.GGUFTokenizerMetadata) -> None:
    """(Every id's bytes equal the GGUF's: ``test_real_vocabularies.py``.)"""
    control = np.flatnonzero(meta.token_types == gguf_meta.CONTROL)
    assert all(gemma.vocab.token_bytes[t] is None for t in control.tolist())


def test_encoding_is_the_ggufs_sentencepiece(gemma: RealVocabulary,
                                            meta: gguf_meta.GGUFTokenizerMetadata) -> None:
    pytest.importorskip("sentencepiece", reason="pip install sentencepiece")
    from radixlm.testing.gguf_sentencepiece import gguf_sentencepiece

    reference = gguf_sentencepiece(meta)
    for text in _samples():
        ids = gemma.encode(text)
        assert ids == reference.encode(text), text
        assert gemma.vocab.decode_bytes(ids) == text.encode("utf-8")
        assert gemma.backend.decode(ids) == text


def test_bos_eos_and_turn_markers(gemma: RealVocabulary) -> None:
    tok, vocab = gemma.backend, gemma.vocab
    assert tok.encode("Hi") == [2, *gemma.encode("Hi")]  # BOS added, as add_bos_token says
    assert tok.eos_token_id == 1 and vocab.eos_token_ids == (1, 106)
    assert tok.convert_ids_to_tokens([105, 106]) == ["<start_of_turn>", "<end_of_turn>"]
    for tid in (0, 1, 2, 3, 4, 105, 106, 6, 262143):  # pad eos bos unk mask turns unused
        assert vocab.token_bytes[tid] is None, tid


def test_byte_fallback_spaces_and_user_defined(gemma: RealVocabulary,
                                               meta: gguf_meta.GGUFTokenizerMetadata) -> None:
    tok, vocab = gemma.backend, gemma.vocab
    fallback = np.flatnonzero(meta.token_types == gguf_meta.BYTE).tolist()
    assert [vocab.token_bytes[t] for t in fallback] == [bytes([b]) for b in range(256)]
    assert [meta.tokens[t] for t in fallback[:2]] == ["<0x00>", "<0x01>"]
    assert vocab.token_bytes[tok.convert_tokens_to_ids("\u2581Hello")] == b" Hello"
    assert vocab.token_bytes[tok.convert_tokens_to_ids("\u2581")] == b" "
    for tid, data in ((107, b"\n"), (138, b"  "), (168, b"<table>"), (255968, b"\t")):
        assert vocab.token_bytes[tid] == data  # user-defined pieces: their raw text
    emoji = "\U0001fae8"  # no piece of its own: four byte-fallback tokens
    assert gemma.encode(emoji) == [fallback[b] for b in emoji.encode("utf-8")]
