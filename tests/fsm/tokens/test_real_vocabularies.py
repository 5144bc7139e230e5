"""TokenVocabulary on four real vocabularies: SmolLM2's byte-level BPE (from its GGUF),
Mistral's tekken, Mistral's SentencePiece model with byte fallback and Gemma 3's 262k
SentencePiece with byte fallback (from its GGUF).

Each is read from installed package data (skipped, naming the package, when it is absent).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from radixlm import default_model
from radixlm.fsm.tokens.gguf_tokenizer_metadata import read_tokenizer_metadata
from radixlm.fsm.tokens.vocabulary import tokenizer_token_bytes
from radixlm.fsm.tokens.vocabulary_sources import gguf_token_bytes
from radixlm.testing.real_vocabularies import RealVocabulary

SIZES = {"smollm2": 49152, "tekken": 131072, "sentencepiece": 32768, "gemma3": 262144}
TEXTS = ['{"name": "Zoë", "tags": ["a", "b"], "n": -12.5e3}', "  indented\n\tline",
         "日本語のテキスト 😀", "x" * 40, '{"k":null,"t":true}']


def _reference_bytes(real: RealVocabulary, tid: int) -> bytes | None:
    """The token's bytes as the tokenizer itself decodes them (None: not comparable)."""
    b = real.backend
    if real.name == "tekken":
        return b.id_to_byte_piece(tid)
    if real.name == "sentencepiece":
        if b.is_byte(tid):
            return None  # checked on its own (byte fallback)
        anchor = b.piece_to_id("a")  # decoding strips a leading space of the first piece
        return b.decode([anchor, tid]).encode("utf-8")[1:]
    text = b.decode([tid])
    return None if "\ufffd" in text else text.encode("utf-8")


def test_size_and_eos(real: RealVocabulary) -> None:
    vocab = real.vocab
    assert vocab.vocab_size == len(vocab.token_bytes) == SIZES[real.name]
    assert vocab.eos_token_ids and all(vocab.token_bytes[e] is None for e in vocab.eos_token_ids)
    assert len(vocab.walk_ids) > 0.97 * vocab.vocab_size - 1000  # nearly all are text


def test_token_bytes_match_the_tokenizer(real: RealVocabulary) -> None:
    vocab, checked = real.vocab, 0
    for tid in range(0, vocab.vocab_size, 37):
        data = vocab.token_bytes[tid]
        if data is None:
            continue
        expected = _reference_bytes(real, tid)
        if expected is not None:
            assert data == expected, (tid, data, expected)
            checked += 1
    assert checked > vocab.vocab_size // 50


def test_gguf_metadata_gives_the_tokenizers_bytes(real: RealVocabulary) -> None:
    """Read straight from the GGUF's metadata or through transformers' tokenizer converted
    from it: the same bytes for every id (the vocabularies that come from a GGUF)."""
    gguf = {"smollm2": default_model.smollm2_gguf_path,
            "gemma3": default_model.gemma3_gguf_path}.get(real.name)
    if gguf is None:
        pytest.skip(f"{real.name} does not come from a GGUF file")
    meta = read_tokenizer_metadata(gguf())
    assert meta.model == {"smollm2": "gpt2", "gemma3": "llama"}[real.name]
    assert gguf_token_bytes(meta) == tokenizer_token_bytes(real.backend)


@pytest.mark.parametrize("text", TEXTS)
def test_encoded_text_round_trips_through_token_bytes(real: RealVocabulary, text: str) -> None:
    ids = real.encode(text)
    assert real.vocab.decode_bytes(ids) == text.encode("utf-8")


def test_specials_are_never_text(real: RealVocabulary) -> None:
    vocab, b = real.vocab, real.backend
    if real.name in ("smollm2", "gemma3"):
        special = set(b.all_special_ids) | {
            t for t, tok in b.added_tokens_decoder.items() if tok.special}
        assert {0, 1, 2} <= special
        if real.name == "gemma3":  # pad eos bos unk mask, turn markers, 6,242 unused
            assert {3, 4, 105, 106} <= special and len(special) == 6249
    elif real.name == "tekken":
        special = set(range(b.num_special_tokens))
    else:
        special = {t for t in range(b.get_piece_size()) if b.is_control(t) or b.is_unknown(t)}
        assert {b.bos_id(), b.eos_id(), b.unk_id(), b.piece_to_id("[INST]")} <= special
    assert special and all(vocab.token_bytes[t] is None for t in special)
    assert not set(vocab.walk_ids.tolist()) & special


# SmolLM2's byte-level BPE dropped 21 of its 256 byte symbols (in no token at all): six
# control bytes (raw in no JSON text: strings escape them) and lead bytes no UTF-8 text uses
# (C0, C1, F5-FF) or only planes 4-11 do (F1, F2: unassigned code points)
SMOLLM2_UNSPELLABLE = {0x04, 0x06, 0x13, 0x14, 0x16, 0x1D, 0xC0, 0xC1, 0xF1, 0xF2,
                       *range(0xF5, 0x100)}


def test_every_byte_is_a_token(real: RealVocabulary) -> None:
    """Each byte is the whole text of some token (tekken's first ranks, byte fallback), so
    any byte string can be spelled; in SmolLM2's all but :data:`SMOLLM2_UNSPELLABLE`, which
    no token contains."""
    singles = {data[0] for data in real.vocab.token_bytes if data is not None and len(data) == 1}
    missing = SMOLLM2_UNSPELLABLE if real.name == "smollm2" else set()
    assert singles == set(range(256)) - missing
    assert not any(set(data) & missing for data in real.vocab.token_bytes if data)


def test_byte_fallback_tokens_are_their_byte(load_real: Callable[[str], RealVocabulary]
                                              ) -> None:
    real = load_real("sentencepiece")  # the one with byte-fallback pieces
    b, vocab = real.backend, real.vocab
    fallback = [t for t in range(b.get_piece_size()) if b.is_byte(t)]
    assert len(fallback) == 256
    for tid in fallback:
        assert vocab.token_bytes[tid] == bytes([int(b.id_to_piece(tid)[3:5], 16)])
    assert vocab.token_bytes[b.piece_to_id("<0x41>")] == b"A"
    assert vocab.token_bytes[b.piece_to_id("<0x0A>")] == b"\n"
