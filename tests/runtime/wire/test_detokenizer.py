"""Incremental detokenization: growing text, held-back stop strings and partial UTF-8."""

from __future__ import annotations

import pytest
from transformers import AutoTokenizer

from radixlm.runtime.wire.detokenizer import IncrementalDetokenizer, detokenize_batch
from radixlm.runtime.wire.messages import (
    DetokParams,
    ErrorOut,
    FinishLength,
    FinishStop,
    ReqOut,
    TextBatchOut,
    TokenBatchOut,
)


@pytest.fixture(scope="module")
def tok(tiny_llama_path):
    return AutoTokenizer.from_pretrained(tiny_llama_path)


def feed(detok, ids, step, params, finish=None):
    texts = []
    for i in range(0, len(ids), step):
        last = i + step >= len(ids)
        out = ReqOut(rid="r", new_ids=ids[i:i + step], detok=params if i == 0 else None,
                     finish_reason=finish if last else None)
        texts.append(detok.process(out).text_delta)
    return texts


@pytest.mark.parametrize("step", [1, 3])
def test_deltas_concatenate_to_the_full_decode(tok, step):
    text = 'Héllo wörld, 日本 {"name": "Zoë"} — done.'
    ids = tok(text, add_special_tokens=False).input_ids
    deltas = feed(IncrementalDetokenizer(tok), ids, step, DetokParams(),
                  FinishLength(length=len(ids)))
    assert "".join(deltas) == tok.decode(ids)
    assert not any("\ufffd" in d for d in deltas), "partial UTF-8 must be held back"


def test_stop_string_is_held_back_then_trimmed(tok):
    text = "The answer is 42.\nQuestion: next"
    ids = tok(text, add_special_tokens=False).input_ids
    params = DetokParams(stop_strs=["\nQuestion"])
    deltas = feed(IncrementalDetokenizer(tok), ids, 1, params,
                  FinishStop(matched="\nQuestion"))
    streamed = ""
    for d in deltas:
        streamed += d
        assert "\nQ" not in streamed  # never shows even the start of the stop string
    assert streamed == "The answer is 42."


def test_no_stop_trim_keeps_the_stop_string(tok):
    ids = tok("one two three", add_special_tokens=False).input_ids
    deltas = feed(IncrementalDetokenizer(tok), ids, 2, DetokParams(stop_strs=[" three"],
                  no_stop_trim=True), FinishStop(matched=" three"))
    assert "".join(deltas) == "one two three"


def test_a_decode_error_fails_that_request_alone(tok):
    class Flaky:
        """The tokenizer, except that decoding the id 1234 raises."""

        def __len__(self):
            return len(tok)

        def decode(self, ids, **kw):
            if 1234 in ids:
                raise ValueError("cannot decode 1234")
            return tok.decode(ids, **kw)

    detok = IncrementalDetokenizer(Flaky())
    batch = TokenBatchOut(outs=[ReqOut(rid="a", new_ids=[300, 301]),
                                ReqOut(rid="b", new_ids=[1234]),
                                ReqOut(rid="c", new_ids=[302], finish_reason=FinishLength(1))])
    text, err = detokenize_batch(detok, batch)
    assert isinstance(text, TextBatchOut) and [t.out.rid for t in text.outs] == ["a", "c"]
    assert text.outs[1].text_delta == tok.decode([302])
    assert err == ErrorOut(rid="b", code="internal", message="internal error while "
                           "detokenizing: ValueError: cannot decode 1234")
    assert set(detok.states) == {"a"}, "b's state is dropped, c finished"
