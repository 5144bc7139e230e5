"""One HTTP API over two tiny-model replicas, deployed both ways: ``radixlm router
--worker-urls`` over two running ``radixlm serve`` workers, and ``radixlm serve --dp-size 2``.

Prefix affinity, the native and OpenAI routes (streaming too), abort by rid, aggregated server
info and metrics; last, killing one replica's scheduler fails its in-flight requests with a
5xx naming the worker while the other keeps serving.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from radixlm.router.proxy import WORKER_HEADER
from radixlm.runtime.wire.ipc import free_tcp_port

DOC_A = "Alice keeps three red boxes in the attic and one blue box in the garden shed. "
DOC_B = "The river town sells bread on Mondays, fish on Fridays and honey all week long. "
GREEDY = {"max_new_tokens": 4, "temperature": 0.0}
LONG = {"max_new_tokens": 1500, "ignore_eos": True}
POLLS = 200  # x 0.1 s: the router's health check (every 0.5-1 s) must notice a death


@dataclass(frozen=True)
class Front:
    """The routing front end and the replicas behind it."""

    url: str
    workers: list[str]
    kind: str  # "router" or "serve --dp-size 2"
    proc: subprocess.Popen  # the front end's process


@pytest.fixture(scope="module", params=["router", "serve --dp-size 2"])
def front(request, start_http, tiny_llama_path) -> Front:
    model = ["--model-path", str(tiny_llama_path), "--max-total-tokens", "2048"]
    if request.param == "router":
        workers = [start_http("serve", *model).url for _ in range(2)]
        live = start_http("router", "--worker-urls", *workers,
                          "--health-check-interval-secs", "0.5")
    else:
        live = start_http("serve", *model, "--dp-size", "2")
    info = requests.get(live.url + "/get_server_info", timeout=30).json()
    return Front(live.url, [w["url"] for w in info["workers"]], request.param, live.proc)


def post(front: Front, path: str, body: dict, **kw) -> requests.Response:
    return requests.post(front.url + path, json=body, timeout=120, **kw)


def events(resp: requests.Response) -> list[dict]:
    """The JSON events of a server-sent-event stream, up to ``[DONE]`` (asserted)."""
    out = []
    for line in resp.iter_lines():
        if line.startswith(b"data: "):
            if line == b"data: [DONE]":
                return out
            out.append(json.loads(line[6:]))
    raise AssertionError(f"stream ended without [DONE] after {out[-1:]}")


def test_answers_match_a_worker_and_documents_stick_to_one(front):
    body = {"text": DOC_A + "Question 0?", "sampling_params": GREEDY}
    routed = post(front, "/generate", body)
    direct = requests.post(routed.headers[WORKER_HEADER] + "/generate", json=body, timeout=60)
    assert routed.json()["output_ids"] == direct.json()["output_ids"]
    holders = {doc: {post(front, "/generate", {"text": doc + f"Question {q}?",
                                               "sampling_params": GREEDY}
                          ).headers[WORKER_HEADER] for q in range(3)} for doc in (DOC_A, DOC_B)}
    assert len(holders[DOC_A]) == len(holders[DOC_B]) == 1
    assert holders[DOC_A] != holders[DOC_B]  # the second document went to the emptier one
    again = post(front, "/generate", {"text": DOC_B + "Question 0?", "sampling_params": GREEDY})
    assert again.json()["meta_info"]["cached_tokens"] > 0


def test_streaming_and_the_openai_routes(front):
    body = {"text": DOC_B + "Stream?", "sampling_params": GREEDY}
    whole = post(front, "/generate", body).json()
    with post(front, "/generate", {**body, "stream": True}, stream=True) as resp:
        chunks = events(resp)
    assert chunks[-1]["text"] == whole["text"]
    models = requests.get(front.url + "/v1/models", timeout=30).json()["data"]
    completion = {"model": models[0]["id"], "prompt": DOC_A, "max_tokens": 3,
                  "temperature": 0}
    assert post(front, "/v1/completions", completion).json()["usage"]["completion_tokens"] == 3
    with post(front, "/v1/completions", {**completion, "stream": True}, stream=True) as resp:
        assert "".join(c["choices"][0]["text"] for c in events(resp))
    chat = post(front, "/v1/chat/completions",
                {"model": models[0]["id"], "max_tokens": 2,
                 "messages": [{"role": "user", "content": DOC_A}]})
    assert chat.status_code == 200 and chat.json()["object"] == "chat.completion"
    bad = post(front, "/v1/chat/completions", {"model": models[0]["id"], "messages": "hi"})
    assert bad.status_code == 400 and bad.json()["error"]["worker"] in front.workers


def test_abort_by_rid_goes_to_the_worker_holding_it(front):
    body = {"text": DOC_A + "Long?", "sampling_params": LONG, "rid": "long-1",
            "stream": True}
    with post(front, "/generate", body, stream=True) as resp:
        lines = resp.iter_lines()
        assert next(line for line in lines if line.startswith(b"data: "))
        aborted = post(front, "/abort_request", {"rid": "long-1"}).json()
        assert aborted["workers"] == [resp.headers[WORKER_HEADER]]
        last = [json.loads(x[6:]) for x in lines if x.startswith(b"data: {")][-1]
    assert last["meta_info"]["finish_reason"]["type"] == "abort"


def test_server_info_and_metrics_cover_every_worker(front):
    info = requests.get(front.url + "/get_server_info", timeout=30).json()
    assert [w["alive"] for w in info["workers"]] == [True, True]
    assert all(w["server_info"]["process_ids"]["scheduler"] for w in info["workers"])
    assert len(info["internal_states"]) == 2 and info["policy"] == "cache_aware"
    text = requests.get(front.url + "/metrics", timeout=30).text
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples]
    finished = {s.labels["worker"]: s.value for s in samples
                if s.name == "radixlm_requests_total"}
    routed = {s.labels["worker"]: s.value for s in samples
              if s.name == "radixlm_router_routed_requests_total"}
    assert set(finished) == set(routed) == set(front.workers)
    assert all(v > 0 for v in finished.values())


def _status(front: Front) -> dict[str, dict]:
    info = requests.get(front.url + "/get_server_info", timeout=30).json()
    return {w["url"]: w for w in info["workers"]}


def test_a_dead_replica_fails_its_requests_and_leaves_the_rotation(front):
    # last test of the module: it kills one replica
    victim = post(front, "/generate", {"text": DOC_A + "Which?", "sampling_params": GREEDY}
                  ).headers[WORKER_HEADER]
    scheduler = _status(front)[victim]["server_info"]["process_ids"]["scheduler"]
    stream = post(front, "/generate", {"text": DOC_A + "Long?", "sampling_params": LONG,
                                       "stream": True}, stream=True)
    lines = stream.iter_lines()
    assert next(line for line in lines if line.startswith(b"data: "))
    with ThreadPoolExecutor(1) as pool:
        whole = pool.submit(post, front, "/generate",
                            {"text": DOC_A + "Long too?", "sampling_params": LONG})
        for _ in range(POLLS):  # both in flight on the victim
            if _status(front)[victim]["in_flight"] == 2:
                break
            time.sleep(0.1)
        os.kill(scheduler, signal.SIGKILL)
        failed = whole.result()
    err = [json.loads(x[6:]) for x in lines if x.startswith(b"data: {")][-1]["error"]
    stream.close()
    assert err["worker"] == victim and victim in err["message"]
    assert "scheduler" in err["message"] or "worker_failed" == err["code"]
    assert failed.status_code >= 500 and failed.json()["error"]["worker"] == victim
    for _ in range(POLLS):
        if not _status(front)[victim]["alive"]:
            break
        time.sleep(0.1)
    status = _status(front)
    assert not status[victim]["alive"] and status[victim]["error"]
    (other,) = set(front.workers) - {victim}
    assert status[other]["alive"]
    after = [post(front, "/generate", {"text": doc + "After?", "sampling_params": GREEDY})
             for doc in (DOC_A, DOC_B)]
    assert [r.status_code for r in after] == [200, 200]
    assert {r.headers[WORKER_HEADER] for r in after} == {other}
    assert requests.get(front.url + "/health", timeout=30).ok



def test_killing_serve_dp_stops_its_replicas(front):
    if front.kind == "router":
        pytest.skip("the router does not own its workers (they were started apart)")
    front.proc.kill()  # SIGKILL: no chance to stop the replicas itself
    front.proc.wait()
    for _ in range(POLLS * 5):  # the replicas stop their engines, then exit
        if not any(_listening(url) for url in front.workers):
            break
        time.sleep(0.1)
    assert not [url for url in front.workers if _listening(url)]


def _listening(url: str) -> bool:
    try:
        requests.get(url + "/health", timeout=1)
    except requests.ConnectionError:
        return False
    return True


def test_a_router_with_no_live_worker_answers_503_naming_them(start_http):
    nowhere = f"http://127.0.0.1:{free_tcp_port()}"  # nothing listens there
    url = start_http("router", "--worker-urls", nowhere, wait=False).url
    health = requests.get(url + "/health", timeout=30)
    assert health.status_code == 503 and nowhere in health.json()["error"]["message"]
    refused = requests.post(url + "/v1/completions", json={"prompt": "hi"}, timeout=30)
    assert refused.status_code == 503
    assert nowhere in refused.json()["error"]["message"]
    assert refused.json()["error"]["type"] == "server_overloaded"  # OpenAI's shape
    info = requests.get(url + "/get_server_info", timeout=30).json()
    assert info["workers"][0]["alive"] is False
    assert "unreachable" in info["workers"][0]["error"]
