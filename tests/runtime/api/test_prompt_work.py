"""Prompt work off the event loop: a huge prompt being tokenized never freezes the server, and
client chat templates (allowed here by the operator) run under a step budget."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

BIG_CHARS = 5_000_000
HEALTH_ANSWERS = 5  # /health answers required while the big prompt is still in the server
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def server(tiny_llama_path, start_server):
    return start_server("--model-path", str(tiny_llama_path), "--max-prompt-chars",
                        str(BIG_CHARS + 10), "--allow-client-chat-template")


def post(url: str, path: str, body: dict) -> requests.Response:
    return requests.post(url + path, json=body, timeout=600)


def test_a_5mb_prompt_does_not_freeze_health(server):
    big = ("hello world " * (BIG_CHARS // 12 + 1))[:BIG_CHARS]
    answered = 0
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(post, server, "/generate", {"text": big})
        while not pending.done():
            assert requests.get(f"{server}/health", timeout=600).status_code == 200
            answered += not pending.done()
        result = pending.result()
    # All of it was tokenized: the scheduler refuses the prompt for the context, by count.
    assert result.status_code == 400 and "the prompt has" in result.json()["error"]["message"]
    assert answered >= HEALTH_ANSWERS


def test_a_client_template_is_used_when_the_operator_allows_it(server):
    r = post(server, "/v1/chat/completions", {
        "messages": HI, "max_tokens": 1,
        "chat_template_kwargs": {"chat_template": "{{ messages[0]['content'] }}!"}})
    assert r.status_code == 200, r.text
    plain = post(server, "/generate", {"text": "hi!", "sampling_params": {"max_new_tokens": 1}})
    assert r.json()["usage"]["prompt_tokens"] == plain.json()["meta_info"]["prompt_tokens"]


def test_a_looping_client_template_stops_at_its_step_budget(server):
    loop = "{% for i in range(100000) %}{% for j in range(300) %}{% endfor %}{% endfor %}"
    r = post(server, "/v1/chat/completions", {
        "messages": HI, "chat_template_kwargs": {"chat_template": loop}})
    assert r.status_code == 400
    assert "steps" in r.json()["error"]["message"]
    assert post(server, "/v1/chat/completions", {"messages": HI, "max_tokens": 2}).ok
