"""What a server process gives back after loading: the tokenizer's Python build tables (the
Rust tokenizer still encodes and decodes the same) and the C heap's free pages."""

from __future__ import annotations

import sys

from radixlm.runtime.load_memory import (
    LoadSteps,
    drop_build_tables,
    release_freed_heap,
    rss_mib,
)

TEXTS = ["Hello world, this is a test.", '{"name": "Alice", "age": 34}', "caf\u00e9 \u00fc \u4e2d"]


def _gemma_tokenizer():  # noqa: ANN202
    """A small Gemma-class BPE tokenizer (the class that keeps ``_vocab`` and ``_merges``):
    specials, the 256 byte-fallback tokens, the texts' characters and two merges."""
    from transformers import GemmaTokenizer

    vocab = {t: i for i, t in enumerate(["<pad>", "<eos>", "<bos>", "<unk>", "<mask>"])}
    vocab.update({f"<0x{b:02X}>": len(vocab) + b for b in range(256)})
    for token in sorted(set("".join(TEXTS[:2]).replace(" ", "\u2581"))) + ["ll", "\u2581t"]:
        vocab.setdefault(token, len(vocab))
    return GemmaTokenizer(vocab=vocab, merges=[("l", "l"), ("\u2581", "t")])


def test_dropping_build_tables_changes_no_encoding():
    kept, slim = _gemma_tokenizer(), _gemma_tokenizer()
    before = [slim(t).input_ids for t in TEXTS]
    assert drop_build_tables(slim) == len(kept.get_vocab()) + 2
    assert not hasattr(slim, "_vocab") and not hasattr(slim, "_merges")
    assert [slim(t).input_ids for t in TEXTS] == before == [kept(t).input_ids for t in TEXTS]
    assert [slim.decode(ids) for ids in before] == [kept.decode(ids) for ids in before]
    assert slim.get_vocab() == kept.get_vocab() and len(slim) == len(kept)
    assert drop_build_tables(slim) == 0  # nothing left to drop


def test_a_tokenizer_without_a_rust_backend_is_left_alone():
    class Slow:
        backend_tokenizer = None
        _vocab = {"a": 0}

    slow = Slow()
    assert drop_build_tables(slow) == 0 and slow._vocab == {"a": 0}


def test_heap_release_and_rss_steps():
    assert release_freed_heap() is sys.platform.startswith("linux")
    steps = LoadSteps()
    steps.mark("start")
    if rss_mib() is None:
        return
    line = steps.describe()
    assert line.startswith("RSS ") and "peak" in line and "(after start " in line
