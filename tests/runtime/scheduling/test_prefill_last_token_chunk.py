"""A chunked prefill that leaves exactly one prompt token for the next step must still go
through the prefill path: that token's prompt logprob is scored and a prefill-only request
ends without sampling. (It used to be taken for a decode: the request sampled a token and
its prompt logprobs were never sent; under load, concurrent selects then got "the server
scored tokens [] for choice ...".)"""

from __future__ import annotations

import pytest

CHUNK = 8


@pytest.fixture(scope="module")
def engine(make_engine, tiny_llama_path):
    return make_engine(tiny_llama_path, chunked_prefill_size=CHUNK, disable_radix_cache=True)


@pytest.fixture(scope="module")
def prompt_ids(engine):
    ids = engine.tokenizer("one two three four five six seven eight nine ten").input_ids
    return ids[: CHUNK + 1]  # one chunk of CHUNK, then exactly one token left


@pytest.mark.parametrize("max_new_tokens", [0, 3])
def test_one_token_left_after_a_chunk_is_prefilled_not_decoded(engine, prompt_ids,
                                                               max_new_tokens):
    out = engine.generate(input_ids=prompt_ids, return_logprob=True, logprob_start_len=2,
                          sampling_params={"max_new_tokens": max_new_tokens,
                                           "temperature": 0, "ignore_eos": True})
    meta = out["meta_info"]
    assert [e[1] for e in meta["input_token_logprobs"]] == prompt_ids[2:]
    assert meta["completion_tokens"] == max_new_tokens
    assert len(out["output_ids"]) == max_new_tokens
    whole = engine.generate(input_ids=prompt_ids[:CHUNK], return_logprob=True,
                            logprob_start_len=2, sampling_params={"max_new_tokens": 0})
    # the same positions scored whether or not the prompt straddles a chunk boundary
    split, unsplit = meta["input_token_logprobs"], whole["meta_info"]["input_token_logprobs"]
    assert [e[1] for e in split[: CHUNK - 2]] == [e[1] for e in unsplit]
    assert [e[0] for e in split[: CHUNK - 2]] == pytest.approx([e[0] for e in unsplit],
                                                              rel=1e-4)
