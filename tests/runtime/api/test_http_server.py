"""The HTTP server with real clients: the `openai` package and `requests` against a live
server started by the test through its CLI (`python -m radixlm.launch_server`)."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor

import openai
import pytest
import requests

API_KEY = "test-key"
GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def server(tiny_llama_path, start_server):
    return start_server("--model-path", str(tiny_llama_path), "--api-key", API_KEY,
                        "--max-request-bytes", "20000", "--max-queued-requests", "48",
                        "--page-size", "4")


def post(url: str, path: str, body: dict, key: str | None = API_KEY, **kw) -> requests.Response:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return requests.post(url + path, json=body, headers=headers, timeout=60, **kw)


def get(url: str, path: str) -> requests.Response:
    return requests.get(url + path, headers={"Authorization": f"Bearer {API_KEY}"},
                        timeout=30)


@pytest.fixture(scope="module")
def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{server}/v1", api_key=API_KEY)


@pytest.fixture(scope="module")
def model(client) -> str:
    """The served model's name (an unknown name gets 404)."""
    return client.models.list().data[0].id


def test_openai_chat_completion(client):
    model = client.models.list().data[0].id
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "What is the capital of Japan?"}],
        max_tokens=8, temperature=0, logprobs=True, top_logprobs=2, n=2, seed=1)
    assert len(resp.choices) == 2
    choice = resp.choices[0]
    assert choice.message.role == "assistant" and choice.finish_reason in ("stop", "length")
    assert len(choice.logprobs.content) == resp.usage.completion_tokens // 2
    assert all(len(t.top_logprobs) == 2 for t in choice.logprobs.content)
    assert resp.usage.total_tokens == resp.usage.prompt_tokens + resp.usage.completion_tokens


def test_openai_completion_and_stream_with_usage(client, model):
    full = client.completions.create(model=model, prompt="The weather in Oslo", max_tokens=12,
                                     temperature=0, logprobs=1)
    assert full.choices[0].logprobs.tokens and full.usage.completion_tokens <= 12
    stream = client.completions.create(model=model, prompt="The weather in Oslo", max_tokens=12,
                                       temperature=0, stream=True,
                                       stream_options={"include_usage": True})
    chunks = list(stream)
    text = "".join(c.choices[0].text for c in chunks if c.choices)
    assert text == full.choices[0].text
    assert chunks[-1].usage.completion_tokens == full.usage.completion_tokens
    chat = client.chat.completions.create(model=model, stream=True, temperature=0, max_tokens=6,
                                          messages=[{"role": "user", "content": "hi"}])
    deltas = [c.choices[0].delta.content or "" for c in chat if c.choices]
    assert "".join(deltas)


def test_native_generate_single_batch_stream_logprobs_flush(server):
    one = post(server, "/generate", {"text": "The weather in Oslo",
                                     "sampling_params": {**GREEDY, "max_new_tokens": 6}})
    assert one.ok, one.text
    body = one.json()
    assert set(body) == {"text", "output_ids", "meta_info"}
    assert body["meta_info"]["finish_reason"]["type"] in ("stop", "length")
    batch = post(server, "/generate", {"text": ["a", "The weather in Oslo"],
                                       "sampling_params": {**GREEDY, "max_new_tokens": 6}})
    assert [b["text"] for b in batch.json()][1] == body["text"]
    lp = post(server, "/generate", {"text": "The weather in Oslo", "return_logprob": True,
                                    "logprob_start_len": 0, "top_logprobs_num": 2,
                                    "return_text_in_logprobs": True,
                                    "sampling_params": {**GREEDY, "max_new_tokens": 3}}).json()
    meta = lp["meta_info"]
    assert meta["input_token_logprobs"][0][0] is None and len(meta["output_token_logprobs"]) == 3
    events = []
    with post(server, "/generate", {"text": "The weather in Oslo", "stream": True,
                                    "sampling_params": {**GREEDY, "max_new_tokens": 6}},
              stream=True) as r:
        for line in r.iter_lines():
            if line.startswith(b"data: "):
                events.append(line[6:].decode())
    assert events[-1] == "[DONE]"
    assert json.loads(events[-2])["text"] == body["text"]
    for path in ("/get_model_info", "/model_info", "/get_server_info", "/server_info"):
        assert get(server, path).ok
    assert get(server, "/flush_cache").ok
    assert get(server, "/health_generate").ok
    metrics = get(server, "/metrics").text
    for name in ("radixlm_requests_total", "radixlm_time_to_first_token_seconds",
                 "radixlm_kv_usage", "radixlm_cache_hit_rate", "radixlm_queue_length",
                 "radixlm_grammar_step_ms_p50", "radixlm_grammar_step_ms_p99",
                 "radixlm_grammar_step_ms_max", "radixlm_grammar_step_ms_p99_not_preempted"):
        assert name in metrics
    info = get(server, "/get_server_info").json()  # the scheduler's grammar time per step
    assert 0 <= info["grammar_step_ms_p50"] <= info["grammar_step_ms_p99"] \
        <= info["grammar_step_ms_max"]


def test_200_concurrent_requests_each_equal_alone(server):
    prompts = [f"Question: What is {i} plus {i}?\nAnswer:" for i in range(10)]
    params = {**GREEDY, "max_new_tokens": 8}
    alone = {p: post(server, "/generate", {"text": p, "sampling_params": params}).json()["text"]
             for p in prompts}
    work = [prompts[i % 10] for i in range(200)]
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(
            lambda p: post(server, "/generate", {"text": p, "sampling_params": params}), work))
    assert all(r.status_code == 200 for r in results)
    assert [r.json()["text"] for r in results] == [alone[p] for p in work]


def test_disconnect_mid_stream_aborts_and_kv_returns(server):
    assert get(server, "/flush_cache").ok
    before = get(server, "/server_info").json()
    r = post(server, "/generate", {"text": "The weather in Oslo", "stream": True,
                                   "sampling_params": {**GREEDY, "max_new_tokens": 2000,
                                                       "ignore_eos": True}}, stream=True)
    lines = r.iter_lines()
    for _ in range(4):
        next(lines)
    r.close()  # the client goes away mid-stream
    info = None
    for _ in range(100):
        info = get(server, "/server_info").json()
        if info["running"] == 0:
            break
        time.sleep(0.1)
    assert info["running"] == 0 and info["aborted"] > before["aborted"]
    assert get(server, "/flush_cache").ok
    after = get(server, "/server_info").json()
    assert after["free_pages"] == before["free_pages"] == after["total_pages"]


def test_bad_input_gets_clear_errors_and_the_server_keeps_serving(server):
    r = post(server, "/generate", {"text": "x", "sampling_params": {"temprature": 1}})
    assert r.status_code == 400 and "temprature" in r.json()["error"]["message"]
    r = post(server, "/generate", {"text": "x", "sampling_params": {"max_new_tokens": "ten"}})
    assert r.status_code == 400 and "max_new_tokens" in r.json()["error"]["message"]
    r = post(server, "/generate", {"txt": "x"})
    assert r.status_code == 400 and "txt" in r.json()["error"]["message"]
    r = post(server, "/generate", {"input_ids": [5] * 2100})
    assert r.status_code == 400 and "2100 tokens" in r.json()["error"]["message"]
    r = post(server, "/generate", {"text": "x"}, key="wrong")
    assert r.status_code == 401
    assert requests.get(f"{server}/health", timeout=5).ok  # /health needs no key
    r = post(server, "/generate", {"text": "x" * 30000})
    assert r.status_code == 413
    r = post(server, "/v1/chat/completions", {"messages": [],
                                              "temperature": "hot"})
    err = r.json()["error"]
    assert r.status_code == 400 and "temperature" in err["message"]
    assert err["type"] == "invalid_request_error"
    ok = post(server, "/generate", {"text": "still here", "sampling_params": {"max_new_tokens": 2}})
    assert ok.status_code == 200


def test_flood_beyond_the_queue_gets_503_with_retry_after(server):
    body = {"text": "The weather", "sampling_params": {"max_new_tokens": 200,
                                                       "ignore_eos": True}}
    with ThreadPoolExecutor(96) as pool:  # more clients than --max-queued-requests (48)
        results = list(pool.map(lambda _: post(server, "/generate", body), range(96)))
    codes = [r.status_code for r in results]
    assert set(codes) <= {200, 503} and 503 in codes and 200 in codes
    refused = next(r for r in results if r.status_code == 503)
    assert refused.headers.get("Retry-After")
    assert post(server, "/generate", {"text": "after the flood",
                                      "sampling_params": {"max_new_tokens": 2}}).ok


CITY_SCORE = {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome"]},
                                               "score": {"type": "integer", "minimum": 0,
                                                         "maximum": 9}},
              "required": ["city", "score"], "additionalProperties": False}


def test_openai_response_format_json_schema(client, model):
    schema = CITY_SCORE
    resp = client.chat.completions.create(
        model=model, messages=[{"role": "user", "content": "Give me JSON."}], max_tokens=60,
        temperature=1.0, seed=4,
        response_format={"type": "json_schema",
                         "json_schema": {"name": "answer", "schema": schema, "strict": True}})
    value = json.loads(resp.choices[0].message.content)
    assert value["city"] in ("Paris", "Rome") and 0 <= value["score"] <= 9
    with pytest.raises(openai.BadRequestError) as exc:
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "x"}],
            response_format={"type": "json_schema",
                             "json_schema": {"name": "bad", "schema": {"type": "nope"}}})
    assert "nope" in str(exc.value)


def test_openai_completion_takes_response_format(client, model):
    """/v1/completions takes chat's response_format (vLLM and SGLang do: a base model's way to
    JSON); the openai client sends it in extra_body."""
    fmt = {"type": "json_schema", "json_schema": {"name": "answer", "schema": CITY_SCORE}}
    resp = client.completions.create(model=model, prompt="JSON: ", max_tokens=60,
                                     temperature=1.0, seed=4, n=2,
                                     extra_body={"response_format": fmt})
    for choice in resp.choices:
        value = json.loads(choice.text)
        assert value["city"] in ("Paris", "Rome") and 0 <= value["score"] <= 9
    with pytest.raises(openai.BadRequestError) as exc:
        client.completions.create(model=model, prompt="x", extra_body={"response_format": {
            "type": "json_schema", "json_schema": {"name": "bad", "schema": {"type": "nope"}}}})
    assert "nope" in str(exc.value)


@pytest.mark.parametrize(("headers", "status"), [
    ({"Authorization": f"bearer {API_KEY}"}, 200),      # the scheme is case-insensitive
    ({"Authorization": f"BEARER  {API_KEY} "}, 200),
    ({"X-API-Key": API_KEY}, 200),
    ({"Authorization": "Bearer wrong", "X-API-Key": API_KEY}, 200),
    ({"Authorization": f"Basic {API_KEY}"}, 401),
    ({"Authorization": f"Bearer {API_KEY}x"}, 401),
    ({"Authorization": "Bearer caf\xe9"}, 401),        # not UTF-8 on the wire
])
def test_api_key_schemes(server, headers, status):
    r = requests.get(f"{server}/get_model_info", headers=headers, timeout=30)
    assert r.status_code == status, r.text
