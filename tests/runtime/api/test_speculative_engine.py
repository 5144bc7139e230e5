"""The Engine with ``speculative_algorithm="NGRAM"``: the same outputs as without (greedy,
seeded sampling, n > 1, concurrent requests, streaming, stop strings, logprobs), its
acceptance statistics in ``get_server_info`` and ``/metrics``, and a clean KV pool after."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import jsonschema
import pytest

from radixlm.runtime.api.metrics import ServerMetrics

PASSAGE = ("The old lighthouse keeper climbed the spiral stairs every evening at dusk, "
           "lit the great lamp, and wrote the ships he saw in a leather logbook. ")
PROMPTS = [
    f"{PASSAGE}\nRepeat the passage exactly:\n{PASSAGE[:40]}",
    "The capital of France is",
    f"Question about the text. {PASSAGE} Quote its first sentence: The old",
]
GREEDY = {"temperature": 0.0, "max_new_tokens": 40, "ignore_eos": True}
SCHEMA = {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10},
                                           "age": {"type": "integer", "maximum": 99}},
          "required": ["name", "age"], "additionalProperties": False}


@pytest.fixture(scope="module")
def engines(make_engine, tiny_llama_path):
    plain = make_engine(tiny_llama_path, disable_jump_forward=True)
    spec = make_engine(tiny_llama_path, speculative_algorithm="NGRAM",
                       speculative_max_batch_size=8)
    return plain, spec


def test_greedy_outputs_are_identical(engines):
    plain, spec = engines
    params = [GREEDY, {**GREEDY, "stop": ["lamp"]}, {**GREEDY, "max_new_tokens": 7},
              {**GREEDY, "json_schema": json.dumps(SCHEMA), "ignore_eos": False,
               "max_new_tokens": 80}]
    for p in params:
        want = [o["output_ids"] for o in plain.generate(PROMPTS, p)]
        got = spec.generate(PROMPTS, p)
        assert [o["output_ids"] for o in got] == want, p
    for o in got:
        jsonschema.validate(json.loads(o["text"]), SCHEMA)
    info = spec.get_server_info()
    assert info["spec_verify_steps"] > 0 and info["spec_accept_length_mean"] >= 1
    assert spec.audit() == []


def test_n_and_concurrency_and_seeds_are_unchanged(engines):
    plain, spec = engines
    seeded = {"temperature": 0.9, "max_new_tokens": 24, "seed": 3, "ignore_eos": True}
    for p in ({**GREEDY, "n": 3}, {**seeded, "n": 2}):
        want = [o["output_ids"] for o in plain.generate(PROMPTS[0], p)]
        assert [o["output_ids"] for o in spec.generate(PROMPTS[0], p)] == want
    with ThreadPoolExecutor(6) as pool:
        got = list(pool.map(lambda i: spec.generate(PROMPTS[i % 3], GREEDY)["output_ids"],
                            range(12)))
    alone = [o["output_ids"] for o in plain.generate(PROMPTS, GREEDY)]
    assert got == [alone[i % 3] for i in range(12)]


def test_streaming_and_logprobs(engines):
    plain, spec = engines
    chunks = list(spec.generate(PROMPTS[0], GREEDY, stream=True))
    texts = [c["text"] for c in chunks]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    assert chunks[-1]["output_ids"] == plain.generate(PROMPTS[0], GREEDY)["output_ids"]
    kw = {"return_logprob": True, "top_logprobs_num": 2}
    want = plain.generate(PROMPTS[0], GREEDY, **kw)["meta_info"]["output_token_logprobs"]
    got = spec.generate(PROMPTS[0], GREEDY, **kw)["meta_info"]["output_token_logprobs"]
    assert [t[1] for t in got] == [t[1] for t in want]
    assert all(abs(a[0] - b[0]) < 1e-4 for a, b in zip(got, want))


def test_metrics_report_acceptance(engines):
    _, spec = engines
    spec.generate(PROMPTS[0], GREEDY)
    metrics = ServerMetrics()
    metrics.update_gauges(spec.get_server_info())
    text = metrics.render().decode()
    assert "radixlm_spec_accept_length_mean" in text
    assert "radixlm_spec_accepted_tokens_prompt_lookup" in text
