"""What a server process gives back after loading: the tokenizer's Python build tables (the
Rust tokenizer still encodes and decodes the same) and the C heap's free pages; its threads
share one malloc arena."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

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


# a thread that allocates: glibc gives it an arena of its own unless they are limited;
# malloc_stats() lists the arenas ("Arena N:") on stderr
ARENA_PROBE = """
import ctypes, sys, threading
from radixlm.runtime.load_memory import limit_malloc_arenas
if sys.argv[1] == "limit":
    assert limit_malloc_arenas()
def work():
    blocks = [bytearray(100_000) for _ in range(20)]
threads = [threading.Thread(target=work) for _ in range(3)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL(None).malloc_stats()
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_stats")
def test_threads_share_one_arena_when_limited():
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    stats = {mode: subprocess.run([sys.executable, "-c", ARENA_PROBE, mode], env=env, text=True,
                                  capture_output=True, check=True).stderr
             for mode in ("limit", "default")}
    assert "Arena 0:" in stats["limit"] and "Arena 1:" not in stats["limit"]
    assert "Arena 1:" in stats["default"]  # the probe does make a thread arena otherwise
    kept = subprocess.run([sys.executable, "-c", "from radixlm.runtime.load_memory import "
                           "limit_malloc_arenas as f; print(f())"], text=True,
                          capture_output=True, check=True, env={**env, "MALLOC_ARENA_MAX": "4"})
    assert kept.stdout.strip() == "False"  # the user's setting stands
