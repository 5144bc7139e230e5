"""The encode of a jump-forward's text (forced_text_encoder.ForcedTextEncoder): the ids of
``tokenizer.encode(text, add_special_tokens=False)`` for any text, through the Rust backend
where it is equivalent, the wrapper's encode where it is not (no backend, or one that would
truncate), cached by text within a bound."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from radixlm.runtime.scheduling.forced_text_encoder import ForcedTextEncoder, _plain_backend

TEXTS = ['{"name": "', '", "age": ', "}, {", " true", "\n\t  ", "é漢字 ü", "<|im_end|>", "",
         '"x"' * 40, "</s><s>", "0123456789"]


@pytest.fixture(scope="module")
def tokenizer(tiny_llama_path):  # noqa: ANN001, ANN201
    return AutoTokenizer.from_pretrained(tiny_llama_path)


def test_the_ids_are_the_tokenizers_own(tokenizer) -> None:  # noqa: ANN001
    encode = ForcedTextEncoder(tokenizer)
    assert _plain_backend(tokenizer) is not None, "a fast tokenizer: the backend path"
    for text in TEXTS + TEXTS:  # the second round from the cache
        assert encode(text) == tokenizer.encode(text, add_special_tokens=False), text
    assert encode.hits == len(TEXTS) and encode.misses == len(TEXTS)


def test_the_cache_keeps_at_most_its_size_and_returns_fresh_lists(tokenizer) -> None:  # noqa: ANN001
    encode = ForcedTextEncoder(tokenizer, cache_size=2)
    first = encode("abc")
    first.append(-1)  # the caller's list: the cached ids are not changed by it
    assert encode("abc") == tokenizer.encode("abc", add_special_tokens=False)
    encode("def")
    encode("ghi")  # "abc" is the least recently used: dropped
    hits = encode.hits
    encode("abc")
    assert encode.hits == hits and len(encode._cache) == 2


def test_a_backend_that_would_truncate_is_not_used(tokenizer) -> None:  # noqa: ANN001
    text = '{"name": "abc", "age": 12, "city": "Paris"}'
    expected = tokenizer.encode(text, add_special_tokens=False)
    tokenizer.backend_tokenizer.enable_truncation(3)
    try:
        assert _plain_backend(tokenizer) is None
        assert ForcedTextEncoder(tokenizer)(text) == expected
    finally:
        tokenizer.backend_tokenizer.no_truncation()


def test_a_tokenizer_without_a_backend_is_called_as_it_is() -> None:
    class Plain:
        def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
            assert add_special_tokens is False
            return [len(text)]

    assert ForcedTextEncoder(Plain())("abcd") == [4]


def test_the_light_tokenizer_takes_the_backend_path_without_loading_transformers(
        tiny_llama_path) -> None:  # noqa: ANN001
    """The runtime's own tokenizer (runtime/light_tokenizer.py): the fast path, and no full
    tokenizer loaded to answer its settings (it once was, from two threads at once)."""
    from radixlm.runtime.light_tokenizer import load_light_tokenizer

    light = load_light_tokenizer(tiny_llama_path)
    assert light is not None, "the tiny Llama's folder is a plain tokenizer.json one"
    reference = AutoTokenizer.from_pretrained(tiny_llama_path)
    encode = ForcedTextEncoder(light)
    assert _plain_backend(light) is not None
    assert [encode(t) for t in TEXTS] == [reference.encode(t, add_special_tokens=False)
                                         for t in TEXTS]
    assert light._full_tokenizer is None, "the full tokenizer was loaded"
