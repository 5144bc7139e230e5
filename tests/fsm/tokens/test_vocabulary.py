"""Token bytes: byte-level symbols decoded, byte fallback, specials and padding excluded."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import TokenVocabulary
from radixlm.fsm.tokens.vocabulary import bytes_to_unicode, tokenizer_token_bytes

EOS_IDS = (1, 4)
MODEL_VOCAB = 8192


def test_byte_level_symbols_are_decoded(vocab: TokenVocabulary, tokenizer) -> None:  # noqa: ANN001
    for tid in range(5, len(tokenizer)):
        token = tokenizer.convert_ids_to_tokens(tid)
        expected = tokenizer.convert_tokens_to_string([token]).encode("utf-8")
        if "\ufffd" not in expected.decode("utf-8", "replace"):
            assert vocab.token_bytes[tid] == expected, (tid, token)
    spaced = [t for t in range(len(tokenizer)) if tokenizer.convert_ids_to_tokens(t) == "Ġ{\""]
    assert all(vocab.token_bytes[t] == b' {"' for t in spaced)


def test_specials_eos_and_padding_are_never_text(vocab: TokenVocabulary, tokenizer) -> None:  # noqa: ANN001
    for tid in (0, 1, 2, 3, 4):
        assert vocab.token_bytes[tid] is None
    assert all(vocab.token_bytes[t] is None for t in range(len(tokenizer), MODEL_VOCAB))
    assert vocab.eos_token_ids == EOS_IDS
    assert len(vocab.token_bytes) == MODEL_VOCAB
    assert not set(vocab.walk_ids.tolist()) & {0, 1, 2, 3, 4}


def test_eos_words_mark_only_eos(vocab: TokenVocabulary) -> None:
    bits = np.unpackbits(vocab.eos_words.view(np.uint8), bitorder="little")
    assert np.flatnonzero(bits).tolist() == list(EOS_IDS)


def test_walk_arrays_are_longest_first(vocab: TokenVocabulary) -> None:
    lengths = vocab.walk_lengths
    assert (np.diff(lengths) <= 0).all()
    for row in range(0, len(vocab.walk_ids), 997):
        tid = int(vocab.walk_ids[row])
        data = vocab.token_bytes[tid]
        assert bytes(vocab.walk_cols[: len(data), row].astype(np.uint8)) == data


def test_extendable_means_proper_prefix_of_another(vocab: TokenVocabulary) -> None:
    all_bytes = [b for b in vocab.token_bytes if b]
    for tid in range(5, 400):
        data = vocab.token_bytes[tid]
        if data:
            longer = any(o != data and o.startswith(data) for o in all_bytes)
            assert bool(vocab.extendable[tid]) == longer, (tid, data)


def test_fingerprint_depends_on_bytes_and_eos(vocab: TokenVocabulary) -> None:
    same = TokenVocabulary(vocab.token_bytes, MODEL_VOCAB, EOS_IDS)
    other_eos = TokenVocabulary(vocab.token_bytes, MODEL_VOCAB, (1,))
    assert same.fingerprint == vocab.fingerprint != other_eos.fingerprint


def test_sentencepiece_byte_fallback() -> None:
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    pieces = {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x0A>": 3, "<0xE2>": 4, "\u2581hi": 5, "a": 6}
    tok = Tokenizer(models.BPE(vocab=pieces, merges=[], unk_token="<unk>", byte_fallback=True))
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse()])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>",
                                   eos_token="</s>")
    table = tokenizer_token_bytes(fast)
    assert table[:3] == [None, None, None]
    assert table[3:] == [b"\n", b"\xe2", b" hi", b"a"]


def test_bytes_to_unicode_is_a_bijection() -> None:
    table = bytes_to_unicode()
    assert sorted(table) == list(range(256))
    assert len(set(table.values())) == 256
    assert table[0x20] == "\u0120"


@pytest.mark.parametrize("eos, message", [((9000,), "EOS ids must lie"), ((-1,), "EOS ids")])
def test_bad_eos_ids_are_refused(eos, message) -> None:  # noqa: ANN001
    with pytest.raises(ValueError, match=message):
        TokenVocabulary([b"a"], 8192, eos)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.one_of(st.none(), st.binary(max_size=5).map(
    lambda b: bytes(x % 3 for x in b))), min_size=1, max_size=30))
def test_extendable_is_a_proper_prefix_of_another_token(token_bytes) -> None:  # noqa: ANN001
    vocab = TokenVocabulary(token_bytes, len(token_bytes) + 2, [len(token_bytes)])
    texts = [b for b in vocab.token_bytes if b]
    expected = [bool(b) and any(o != b and o.startswith(b) for o in texts)
                for b in vocab.token_bytes]
    assert vocab.extendable.tolist() == expected
