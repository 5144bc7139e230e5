"""A BPE ``tokenizer.json`` built with its model from files is the file's own parse (its
serialization byte for byte); files it cannot write as lines fall back (None)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from radixlm.default_model import smollm2_gguf_path
from radixlm.runtime.bpe_file_load import load_bpe_from_files, write_merge_lines


def _tokenizer_json(merges: list, vocab: dict[str, int] | None = None) -> bytes:
    vocab = vocab or {"<s>": 0, "a": 1, "b": 2, "ab": 3, "\\": 4, "a\\": 5, "é": 6, "aé": 7,
                      "vocab": 8, "model": 9}
    added = [{"id": 0, "content": "<s>", "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}]
    doc = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
           "normalizer": None, "pre_tokenizer": None, "post_processor": None, "decoder": None,
           "model": {"type": "BPE", "dropout": None, "unk_token": None,
                     "continuing_subword_prefix": None, "end_of_word_suffix": None,
                     "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                     "vocab": vocab, "merges": merges}}
    return json.dumps(doc, ensure_ascii=False, indent=2).encode("utf-8")


@pytest.mark.parametrize("merges", [[["a", "b"], ["a", "\\"], ["a", "é"]],
                                    ["a b", "a \\", "a é"]])
def test_same_tokenizer_as_the_whole_parse(merges: list) -> None:
    data = _tokenizer_json(merges)
    built = load_bpe_from_files(data)
    assert built is not None
    whole = Tokenizer.from_buffer(data)
    assert built.to_str() == whole.to_str()
    for text in ["ab", "a\\ab<s>", "aéab", "vocabmodel"]:
        assert built.encode(text).ids == whole.encode(text).ids


@pytest.mark.parametrize("merges", [[], [["a b", "c"]], [["a", "b\nc"]], ["a b c"],
                                    [["#version", "a"]], [["a", "b", "c"]], [1]])
def test_merges_not_lines_fall_back(merges: list) -> None:
    assert load_bpe_from_files(_tokenizer_json(merges)) is None


def test_added_tokens_numbered_otherwise_fall_back() -> None:
    """An added token past the vocabulary keeps the file's id only through the whole parse."""
    data = json.loads(_tokenizer_json([["a", "b"]]))
    data["added_tokens"][0]["id"] = 10
    del data["model"]["vocab"]["<s>"]
    assert load_bpe_from_files(json.dumps(data).encode()) is None


def test_not_bpe_falls_back() -> None:
    data = json.loads(_tokenizer_json([["a", "b"]]))
    data["model"] = {"type": "WordLevel", "vocab": {"a": 0}, "unk_token": "a"}
    assert load_bpe_from_files(json.dumps(data).encode()) is None


def test_merge_lines_stream() -> None:
    out = io.StringIO()
    assert write_merge_lines(b'[ ["a", "b"] , ["\\u00e9", "a\\\\"] ]', out)
    assert out.getvalue() == "a b\né a\\\n"


def test_real_smollm2_tokenizer() -> None:
    from radixlm.runtime.model.gguf_conversion import resolve_model_path

    path = smollm2_gguf_path()
    if path is None:
        pytest.skip("SmolLM2's GGUF is not installed")
    data = (Path(resolve_model_path(str(path))) / "tokenizer.json").read_bytes()
    built = load_bpe_from_files(data)
    assert built is not None
    assert built.to_str() == Tokenizer.from_buffer(data).to_str()
