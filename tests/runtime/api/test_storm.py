"""A storm against a live server on the tiny model: a few hundred mixed requests (native,
completions and chat; streamed and not; n > 1; json_schema / regex / choices; logprobs) from
16 concurrent clients, some of which disconnect early or are aborted through
``/abort_request``. Asserts: no 5xx, every request answered (or cancelled by its client),
every complete constrained output valid, every stream well-formed JSON to ``[DONE]``, and
afterwards no request left running and free + cached KV = the pool. The workload is seeded;
its size is a count of requests, never a duration."""

from __future__ import annotations

import http.client
import json
import random
import re
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import jsonschema
import pytest
import requests

N_REQUESTS = 320
CONCURRENCY = 16
SEED = 12
SCHEMA = {"type": "object", "properties": {"ok": {"type": "boolean"},
                                           "n": {"type": "integer", "minimum": 0,
                                                 "maximum": 9}},
          "required": ["ok", "n"], "additionalProperties": False}
REGEX = "(yes|no|maybe)"
CHOICES = ["red", "green", "blue"]
IDLE_POLLS = 200  # x 0.1 s for the server to drain after the storm


@dataclass
class Call:
    """One request of the storm and how its client behaves."""

    index: int
    path: str
    body: dict[str, Any]
    stream: bool
    constraint: str | None  # "json", "regex", "choices"
    # "wait"; "disconnect" (close early); "abort" (/abort_request); "bad" (an input that once
    # killed the scheduler, now a 400)
    behaviour: str = "wait"
    status: int = 0
    texts: list[tuple[str, str | None]] = field(default_factory=list)  # (text, finish)


def _constraint(rng: random.Random) -> str | None:
    return rng.choice([None, None, "json", "regex", "choices"])


def _native(rng: random.Random, i: int, kind: str | None, stream: bool) -> dict[str, Any]:
    params: dict[str, Any] = {"max_new_tokens": rng.choice([4, 8, 24]),
                              "temperature": rng.choice([0.0, 0.8]), "n": rng.choice([1, 1, 2])}
    if kind == "json":
        params.update(json_schema=json.dumps(SCHEMA), max_new_tokens=32)
    elif kind == "regex":
        params.update(regex=REGEX, max_new_tokens=16)
    elif kind == "choices":
        params.update(choices=CHOICES, max_new_tokens=16)
    body: dict[str, Any] = {"text": f"storm {i}: tell me", "sampling_params": params,
                            "stream": stream}
    if rng.random() < 0.3:
        body.update(return_logprob=True, top_logprobs_num=rng.choice([0, 2]))
    return body


def _openai(rng: random.Random, i: int, kind: str | None, stream: bool, chat: bool
            ) -> dict[str, Any]:
    body: dict[str, Any] = {"model": "default", "max_tokens": rng.choice([4, 8, 24]),
                            "temperature": rng.choice([0.0, 0.8]), "n": rng.choice([1, 1, 2]),
                            "stream": stream}
    if chat:
        body["messages"] = [{"role": "user", "content": f"storm {i}"}]
        if rng.random() < 0.3:
            body.update(logprobs=True, top_logprobs=2)
    else:
        body["prompt"] = f"storm {i}:"
        if rng.random() < 0.3:
            body["logprobs"] = 2
    if kind == "json":
        body["max_tokens"] = 32
        if chat:
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "s", "schema": SCHEMA}}
        else:
            body["json_schema"] = json.dumps(SCHEMA)
    elif kind == "regex":
        body.update(regex=REGEX, max_tokens=16)
    return body


def make_calls(n: int, seed: int) -> list[Call]:
    rng = random.Random(seed)
    calls = []
    for i in range(n):
        stream = rng.random() < 0.5
        route = rng.choice(["native", "completions", "chat"])
        kind = _constraint(rng)
        if route == "native":
            call = Call(i, "/generate", _native(rng, i, kind, stream), stream, kind)
        else:
            kind = None if kind == "choices" else kind  # choices is a native extension
            call = Call(i, f"/v1/{route.replace('chat', 'chat/completions')}",
                        _openai(rng, i, kind, stream, route == "chat"), stream, kind)
        roll = rng.random()
        if roll < 0.2:
            call.behaviour = "disconnect"
        elif roll < 0.28 and route == "native":
            call.behaviour = "abort"
            call.body.update(rid=f"storm-{i}")
            call.body["sampling_params"].update(n=1, max_new_tokens=64, ignore_eos=True)
        elif roll < 0.31 and route == "native":
            call.behaviour = "bad"
            call.body["sampling_params"].update(regex=None, choices=None,
                                                json_schema="[" * 1000 + "]" * 1000)
        calls.append(call)
    return calls


def _finish_of(choice: dict[str, Any]) -> str | None:
    reason = choice.get("finish_reason")
    if isinstance(reason, dict):
        return reason.get("type")
    return reason


def _collect(call: Call, events: list[dict[str, Any]]) -> None:
    """Per output sequence: its final text and finish reason."""
    if call.path == "/generate":
        last: dict[int, dict] = {}
        for e in events if call.stream else [events[0]] if isinstance(events[0], dict) \
                else events[0]:
            last[e.get("index", 0)] = e
        for e in last.values():
            call.texts.append((e["text"], _finish_of(e["meta_info"])))
        return
    chat = "chat" in call.path
    text: dict[int, str] = {}
    finish: dict[int, str | None] = {}
    for e in events:
        for c in e.get("choices", []):
            i = c["index"]
            piece = (c.get("delta", {}).get("content") if call.stream else
                     c["message"]["content"]) if chat else c["text"]
            text[i] = text.get(i, "") + (piece or "")
            finish[i] = c.get("finish_reason") or finish.get(i)
    call.texts.extend((text[i], finish.get(i)) for i in sorted(text))


def _disconnect(url: str, call: Call, rng: random.Random) -> None:
    """Send the request, then hang up: at once, or after the first streamed line."""
    u = urlparse(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        conn.request("POST", call.path, body=json.dumps(call.body),
                     headers={"Content-Type": "application/json"})
        if call.stream and rng.random() < 0.5:
            resp = conn.getresponse()
            call.status = resp.status
            resp.fp.readline()
    finally:
        conn.close()


def _run(url: str, call: Call) -> Call:
    rng = random.Random(call.index)
    if call.behaviour == "disconnect":
        _disconnect(url, call, rng)
        return call
    if call.behaviour == "abort":
        with ThreadPoolExecutor(1) as pool:
            pool.submit(lambda: (time.sleep(rng.random() * 0.2),
                                 requests.post(f"{url}/abort_request", timeout=60,
                                               json={"rid": call.body["rid"]})))
            return _send(url, call)
    return _send(url, call)


def _send(url: str, call: Call) -> Call:
    with requests.post(url + call.path, json=call.body, stream=call.stream, timeout=120) as r:
        call.status = r.status_code
        if r.status_code != 200:
            return call
        if not call.stream:
            _collect(call, [json.loads(r.text, parse_constant=_not_json)])
            return call
        lines = [ln for ln in r.iter_lines() if ln.startswith(b"data: ")]
    assert lines and lines[-1] == b"data: [DONE]", (call, lines[-2:])
    events = [json.loads(ln[6:], parse_constant=_not_json) for ln in lines[:-1]]
    errors = [e["error"] for e in events if "error" in e]
    if call.behaviour == "bad" and errors:  # refused after the stream began: its code
        call.status = {"invalid_request": 400}.get(errors[0].get("code"), 500)
        return call
    assert not errors, (call, errors)
    _collect(call, events)
    return call


def _not_json(token: str) -> Any:
    raise AssertionError(f"non-JSON number {token}")


def _valid(kind: str, text: str) -> bool:
    if kind == "json":
        try:
            jsonschema.validate(json.loads(text), SCHEMA)
        except (ValueError, jsonschema.ValidationError):
            return False
        return True
    if kind == "regex":
        return re.fullmatch(REGEX, text) is not None
    return text in CHOICES


@pytest.fixture(scope="module")
def url(tiny_llama_path, start_server) -> str:
    return start_server("--model-path", str(tiny_llama_path), "--max-running-requests", "32")


def test_storm_of_mixed_requests_with_disconnects_and_aborts(url):
    calls = make_calls(N_REQUESTS, SEED)
    with ThreadPoolExecutor(CONCURRENCY) as pool:
        done = list(pool.map(lambda c: _run(url, c), calls))
    behaviours = Counter(c.behaviour for c in done)
    statuses = Counter(c.status for c in done if c.status)
    answered = [c for c in done if c.behaviour in ("wait", "abort")]
    assert not [c for c in done if c.status >= 500], statuses
    assert all(c.status == 400 for c in done if c.behaviour == "bad"), statuses
    assert all(c.status == 200 and c.texts for c in answered), [
        (c.path, c.status) for c in answered if c.status != 200 or not c.texts][:5]
    constrained = [(c.constraint, t) for c in answered if c.constraint
                   for t, finish in c.texts if finish == "stop"]
    invalid = [(k, t) for k, t in constrained if not _valid(k, t)]
    assert not invalid, invalid[:5]
    aborted = sum(f == "abort" for c in answered if c.behaviour == "abort" for _, f in c.texts)
    info: dict[str, Any] = {}
    for _ in range(IDLE_POLLS):
        info = requests.get(f"{url}/get_server_info", timeout=30).json()
        if info["running"] == 0 and info["waiting"] == 0:
            break
        time.sleep(0.1)
    assert info["running"] == 0 and info["waiting"] == 0, info
    assert info["running_tokens"] == 0
    # page size 1: a cached token holds one page
    assert info["free_pages"] + info["tree_tokens"] == info["total_pages"], info
    assert requests.get(f"{url}/health", timeout=10).status_code == 200
    print(f"\nstorm: {len(done)} requests {dict(behaviours)}, statuses {dict(statuses)}, "
          f"{aborted} aborted mid-run, {len(constrained)} complete constrained outputs valid; "
          f"pool: {info['free_pages']} free + {info['tree_tokens']} cached = "
          f"{info['total_pages']} pages")
