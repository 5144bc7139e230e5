"""Stress: many concurrent select programs sharing a few-shot prefix (the shape of SGLang's
hellaswag run_batch) on an engine whose small prefill chunks split prompts at every offset,
so some choice prompts end a chunk one token short of their end. Every select must get
its choice tokens scored (this caught "the server scored tokens [] for choice ...")."""

from __future__ import annotations

import random

import pytest

import radixlm as sgl

PROGRAMS, THREADS = 64, 16
SHOTS = "".join(f"Context: a man picks up box {i}.\nEnding: he carries it home.\n\n"
                for i in range(6))
ENDINGS = [" the lawn begins to sing.", " he eats it.", " she walks away slowly.",
           " it rains."]


@sgl.function
def pick_ending(s, context, endings):
    s += SHOTS + "Context: " + context + "\nEnding:"
    s += sgl.select("ending", choices=endings)


@pytest.fixture(scope="module")
def chunky_engine(tiny_llama_path):
    engine = sgl.Engine(model_path=str(tiny_llama_path), chunked_prefill_size=13)
    yield engine
    engine.shutdown()


@pytest.mark.parametrize("backend_kind", ["engine", "endpoint"])
def test_concurrent_selects_sharing_prefixes_all_score(chunky_engine, tiny_server_url,
                                                       backend_kind):
    backend = chunky_engine if backend_kind == "engine" else sgl.RuntimeEndpoint(
        tiny_server_url)
    rng = random.Random(0)
    batch = [{"context": f"a woman mows lawn {i % 8}" + " quickly" * (i % 5),
              "endings": rng.sample(ENDINGS, 4)} for i in range(PROGRAMS)]
    states = pick_ending.run_batch(batch, backend=backend, num_threads=THREADS)
    for args, state in zip(batch, states):
        assert state["ending"] in args["endings"]
        meta = state.get_meta_info("ending")
        spans = meta["choice_token_spans"]
        assert all(end > start for start, end in spans)
        assert [len(e) for e in meta["input_token_logprobs"]] == [e - s for s, e in spans]
