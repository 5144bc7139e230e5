"""SGLang / OpenAI surface details through real clients against a live ``radixlm serve``:
echo with prompt logprobs (how lm-eval-harness scores), logit_bias, fields refused by name,
``/v1/models/{id}``, JSON errors on unknown routes, and SGLang's streaming logprob contract."""

from __future__ import annotations

import json

import openai
import pytest
import requests
from transformers import AutoTokenizer

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def client(tiny_server_url):
    return openai.OpenAI(base_url=tiny_server_url + "/v1", api_key="unused")


@pytest.fixture(scope="module")
def model(client):
    return client.models.list().data[0].id


def test_echo_with_max_tokens_0_scores_every_prompt_token(client, model, tiny_server_url):
    r = client.completions.create(model=model, prompt=PROMPT, max_tokens=0, echo=True,
                                  logprobs=1)
    lp = r.choices[0].logprobs
    native = requests.post(tiny_server_url + "/generate", json={
        "text": PROMPT, "return_logprob": True, "logprob_start_len": 0,
        "sampling_params": {"max_new_tokens": 0}}).json()["meta_info"]
    assert r.choices[0].text == PROMPT
    assert lp.token_logprobs == [e[0] for e in native["input_token_logprobs"]]
    assert lp.token_logprobs[0] is None and all(v < 0 for v in lp.token_logprobs[1:])
    # text_offset indexes the echoed text: the BOS takes no width, then each token's text
    assert "".join(lp.tokens[1:]) == PROMPT
    assert lp.text_offset == [0] + [len("".join(lp.tokens[1:k]))
                                    for k in range(1, len(lp.tokens))]


def test_echo_streamed_and_with_a_completion(client, model):
    whole = client.completions.create(model=model, prompt=PROMPT, max_tokens=3, echo=True,
                                      logprobs=0, temperature=0)
    text = whole.choices[0].text
    assert text.startswith(PROMPT) and len(whole.choices[0].logprobs.tokens) == (
        whole.usage.prompt_tokens + whole.usage.completion_tokens)
    chunks = list(client.completions.create(model=model, prompt=PROMPT, max_tokens=3,
                                            echo=True, temperature=0, stream=True))
    assert "".join(c.choices[0].text for c in chunks if c.choices) == text


def test_logit_bias_forces_a_token_and_bad_ids_are_named(client, model, tiny_llama_path):
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    target = tok.encode("F", add_special_tokens=False)[0]
    r = client.completions.create(model=model, prompt="Hi", max_tokens=3, temperature=0,
                                  logit_bias={str(target): 100})
    assert r.choices[0].text == tok.decode([target] * 3)
    with pytest.raises(openai.BadRequestError, match="logit_bias"):
        client.completions.create(model=model, prompt="Hi", max_tokens=1,
                                  logit_bias={str(len(tok) + 5): 1})


def test_suffix_is_refused_by_name(client, model):
    with pytest.raises(openai.BadRequestError, match="suffix"):
        client.completions.create(model=model, prompt="Hi", max_tokens=1, suffix="!")


def test_models_by_id(client, model):
    assert client.models.retrieve(model).id == model
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.models.retrieve("no-such-model")


@pytest.mark.parametrize("method, path, says", [
    ("GET", "/no/such/route", "no route GET /no/such/route"),
    ("POST", "/concate_and_append_request", "parallel encoding"),
    ("GET", "/v1/nothing", "no route GET /v1/nothing"),
])
def test_unknown_routes_answer_a_json_error_naming_them(tiny_server_url, method, path, says):
    r = requests.request(method, tiny_server_url + path, json={})
    assert r.status_code == 404
    assert says in r.json()["error"]["message"]


def test_sglang_sampling_fields_are_accepted_and_unknown_ones_named(tiny_server_url):
    params = {"max_new_tokens": 2, "stop_regex": [], "stream_interval": 1, "beam_width": 1,
              "sampling_seed": 3, "logit_bias": None, "watermark": None}
    body = {"text": "Hi", "sampling_params": params, "log_metrics": True, "routing_key": "k",
            "return_hidden_states": False, "lora_path": None, "extra_key": "tenant"}
    assert requests.post(tiny_server_url + "/generate", json=body).ok
    bad = requests.post(tiny_server_url + "/generate",
                        json={"text": "Hi", "sampling_params": {"stop_regexp": []}})
    assert bad.status_code == 400 and "stop_regexp" in bad.json()["error"]["message"]
    refused = requests.post(tiny_server_url + "/generate", json={"text": "Hi", "lora_id": "x"})
    assert refused.status_code == 400 and "lora_id" in refused.json()["error"]["message"]


def test_streamed_logprobs_are_per_chunk_deltas(tiny_server_url):
    """SGLang's contract (its test_stream_logprobs): each chunk carries only its new output
    logprobs; ``output_token_logprobs_length`` and ``completion_tokens`` count all so far."""
    body = {"text": PROMPT, "stream": True, "return_logprob": True,
            "sampling_params": {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}}
    chunks = []
    with requests.post(tiny_server_url + "/generate", json=body, stream=True) as r:
        for line in r.iter_lines():
            if line.startswith(b"data: {"):
                chunks.append(json.loads(line[6:])["meta_info"])
    seen = 0
    for meta in chunks:
        assert meta["output_token_logprobs_length"] == meta["completion_tokens"]
        assert len(meta["output_token_logprobs"]) == meta["completion_tokens"] - seen
        seen = meta["completion_tokens"]
    assert seen == 12
