"""Bad input over HTTP: each gets a 4xx naming the problem (never a 500), streams included,
and a greedy canary request beside each one is still served."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import requests

CONTEXT = 2048  # the tiny model's
MAX_PROMPT_CHARS = 4000
HI = {"role": "user", "content": "hi"}


@pytest.fixture(scope="module")
def server(tiny_llama_path, start_server):
    return start_server("--model-path", str(tiny_llama_path), "--context-length", str(CONTEXT),
                        "--max-queued-requests", "4", "--max-prompt-chars",
                        str(MAX_PROMPT_CHARS), "--page-size", "4")


def raw_post(url: str, path: str, body: bytes | dict, **kw) -> requests.Response:
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    return requests.post(url + path, data=data, timeout=60,
                         headers={"Content-Type": "application/json"}, **kw)


def nested(depth: int) -> dict:
    schema: dict = {"type": "string"}
    for _ in range(depth):
        schema = {"type": "array", "items": schema}
    return schema


# (route, body, status, a fragment the error message must contain)
CASES = {
    # 1: limits checked at the API
    "completion-logprobs": ("/v1/completions", {"prompt": "hi", "max_tokens": 2,
                                                "logprobs": 100000}, 400, "logprobs"),
    "chat-top-logprobs": ("/v1/chat/completions", {"messages": [HI], "logprobs": True,
                                                   "top_logprobs": 100000}, 400,
                          "top_logprobs"),
    "chat-top-logprobs-21": ("/v1/chat/completions", {"messages": [HI], "logprobs": True,
                                                      "top_logprobs": 21}, 400,
                             "less than or equal to 20"),
    "generate-top-logprobs-vocab": ("/generate", {"text": "hi", "return_logprob": True,
                                                  "top_logprobs_num": 8193}, 400,
                                    "vocabulary size (8192)"),
    "schema-1000-deep-string": ("/generate", {"text": "hi", "sampling_params": {
        "json_schema": "[" * 1000 + "]" * 1000}}, 400, "json_schema is nested too deeply"),
    "schema-deep-object": ("/generate", {"text": "hi", "sampling_params": {
        "json_schema": json.dumps(nested(50))}}, 400, "limit is 48 levels"),
    "response-format-600-deep": ("/v1/chat/completions", {
        "messages": [HI], "response_format": {"type": "json_schema", "json_schema": {
            "name": "x", "schema": nested(600)}}}, 400, "limit is 64 levels"),
    # 7: 400 where a 500 was
    "max-tokens-1e30": ("/v1/completions", b'{"prompt": "hi", "max_tokens": 1e30}', 400,
                        "max_tokens"),
    "max-new-tokens-1e30": ("/generate", b'{"text": "hi", "sampling_params": '
                            b'{"max_new_tokens": 1e30}}', 400, "max_new_tokens"),
    "seed-2**70": ("/generate", {"text": "hi", "sampling_params": {"seed": 2**70}}, 400,
                   "64 bits"),
    "chat-seed-2**70": ("/v1/chat/completions", {"messages": [HI], "seed": 2**70}, 400,
                        "64 bits"),
    "input-ids-2**70": ("/generate", {"input_ids": [2**70]}, 400, "64 bits"),
    "not-utf8": ("/generate", b'{"text": "caf\xe9"}', 400, "not UTF-8"),
    "lone-surrogate": ("/generate", b'{"text": "\\ud800"}', 400, "surrogate"),
    "chat-lone-surrogate": ("/v1/chat/completions", b'{"messages": [{"role": "user", '
                            b'"content": "a\\udfff"}]}', 400, "surrogate"),
    "body-100000-deep": ("/generate", b"[" * 100000 + b"]" * 100000, 400,
                         "nested too deeply"),
    "body-100-deep": ("/v1/completions", {"prompt": "hi", "user": None,
                                          "logit_bias": nested(100)}, 400,
                      "limit is 64 levels"),
    # 8: as strict as OpenAI / vLLM
    "unknown-model": ("/v1/chat/completions", {"model": "gpt-9", "messages": [HI]}, 404,
                      "`gpt-9` does not exist"),
    "unknown-model-completion": ("/v1/completions", {"model": "gpt-9", "prompt": "x"}, 404,
                                 "does not exist"),
    "max-tokens-over-context": ("/v1/completions", {"prompt": "hi", "max_tokens": CONTEXT},
                                400, f"exceed the context length of {CONTEXT}"),
    "max-new-tokens-over-context": ("/generate", {"text": "hi", "sampling_params": {
        "max_new_tokens": 10**6}}, 400, "exceed the context length"),
    "temperature-infinity": ("/v1/completions", b'{"prompt": "hi", "temperature": Infinity}',
                             400, "Infinity is not a JSON number"),
    "temperature-nan": ("/generate", b'{"text": "hi", "sampling_params": '
                        b'{"temperature": NaN}}', 400, "NaN is not a JSON number"),
    "temperature-1e400": ("/v1/chat/completions", b'{"messages": [{"role": "user", '
                          b'"content": "x"}], "temperature": 1e400}', 400, "out of range"),
    "temperature-3": ("/v1/chat/completions", {"messages": [HI], "temperature": 3}, 400,
                      "temperature"),
    "top-p-1.5": ("/v1/completions", {"prompt": "hi", "top_p": 1.5}, 400, "top_p"),
    "presence-penalty-3": ("/v1/chat/completions", {"messages": [HI],
                                                    "presence_penalty": 3}, 400,
                           "presence_penalty"),
    "frequency-penalty--3": ("/v1/completions", {"prompt": "hi", "frequency_penalty": -3},
                             400, "frequency_penalty"),
    "n-0": ("/v1/completions", {"prompt": "hi", "n": 0}, 400, "'n'"),
    "logprob-start-len--5": ("/generate", {"text": "hi", "return_logprob": True,
                                           "logprob_start_len": -5}, 400,
                             "logprob_start_len"),
    "stop-token-ids-outside-vocab": ("/generate", {"text": "hi", "sampling_params": {
        "stop_token_ids": [5, 99999]}}, 400, "outside the vocabulary"),
    "chat-stop-token-ids-outside-vocab": ("/v1/chat/completions", {
        "messages": [HI], "stop_token_ids": [8192]}, 400, "outside the vocabulary"),
    # 5: prompt size and client templates
    "prompt-too-many-chars": ("/generate", {"text": "x" * (MAX_PROMPT_CHARS + 1)}, 400,
                              "--max-prompt-chars"),
    "chat-too-many-chars": ("/v1/chat/completions", {"messages": [
        {"role": "user", "content": "x" * (MAX_PROMPT_CHARS + 1)}]}, 400,
        "--max-prompt-chars"),
    "client-chat-template": ("/v1/chat/completions", {
        "messages": [HI], "chat_template_kwargs": {"chat_template": "{{ 'x' }}"}}, 400,
        "--allow-client-chat-template"),
    "reserved-template-kwarg": ("/v1/chat/completions", {
        "messages": [HI], "chat_template_kwargs": {"tokenize": True}}, 400, "tokenize"),
    # 6: streams get the status too (validation, and an admission the scheduler refuses)
    "stream-validation": ("/generate", {"text": "hi", "stream": True, "sampling_params": {
        "max_new_tokens": 10**6}}, 400, "context length"),
    "stream-prompt-over-context": ("/generate", {"input_ids": [5] * (CONTEXT + 10),
                                                 "stream": True}, 400,
                                   f"the prompt has {CONTEXT + 10} tokens"),
    "chat-stream-validation": ("/v1/chat/completions", {
        "messages": [HI], "stream": True, "max_tokens": 10**6}, 400, "context length"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_input_is_refused_clearly_and_the_server_keeps_serving(server, case):
    path, body, status, fragment = CASES[case]
    r = raw_post(server, path, body)
    assert r.status_code == status, r.text[:500]
    assert r.headers["content-type"].startswith("application/json")
    err = r.json()["error"]
    assert fragment in err["message"], err
    if path.startswith("/v1/"):
        assert err["type"] == "invalid_request_error"
    canary = raw_post(server, "/generate", {"text": "canary", "sampling_params": {
        "max_new_tokens": 2, "temperature": 0}})
    assert canary.status_code == 200, canary.text
    assert requests.get(f"{server}/health", timeout=10).ok


@pytest.mark.parametrize("model", ["default", "served-name", "path-name"])
def test_the_served_model_and_its_aliases_are_accepted(server, tiny_llama_path, model):
    served = requests.get(f"{server}/v1/models", timeout=10).json()["data"][0]["id"]
    name = {"default": "default", "served-name": served,
            "path-name": tiny_llama_path.name}[model]
    r = raw_post(server, "/v1/completions", {"model": name, "prompt": "hi", "max_tokens": 2})
    assert r.status_code == 200, r.text


def _hold_queue(server: str) -> tuple[requests.Response, Iterator[bytes]]:
    """A streaming request whose n = 4 sequences fill --max-queued-requests (4); keep the
    line iterator alive (dropping it closes the connection, which aborts the request)."""
    r = raw_post(server, "/generate", {"text": "hold", "stream": True, "sampling_params": {
        "n": 4, "max_new_tokens": CONTEXT - 48, "ignore_eos": True}}, stream=True)
    assert r.status_code == 200
    lines = r.iter_lines()
    next(lines)  # its first event: all four sequences are in flight
    return r, lines


@pytest.mark.parametrize(("path", "body", "code_field"), [
    ("/generate", {"text": "x", "stream": True}, "code"),
    ("/v1/completions", {"prompt": "x", "stream": True}, "type"),
    ("/v1/chat/completions", {"messages": [HI], "stream": True}, "type"),
])
def test_overload_answers_a_stream_with_503_and_retry_after(server, path, body, code_field):
    held, _lines = _hold_queue(server)
    try:
        r = raw_post(server, path, body, stream=True)
        assert r.status_code == 503, r.text
        assert r.headers.get("Retry-After")
        err = r.json()["error"]
        assert err[code_field] == ("server_overloaded" if code_field == "type"
                                   else "overloaded")
    finally:
        held.close()
