"""A dead engine is never served: kill -9 the scheduler child of a live ``radixlm serve``;
requests in flight get an error, ``/health`` fails, the server exits non-zero and logs the
child's real exit status. Waits are bounded polls, never timings. (The in-process Engine's
case is ``test_engine.py::test_scheduler_crash_is_reported_not_hung``.)"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

LONG = {"max_new_tokens": 2000, "ignore_eos": True, "temperature": 0.0}
POLLS = 300  # x 0.1 s


def _poll(predicate, what: str) -> None:  # noqa: ANN001
    for _ in range(POLLS):
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"never happened: {what}")


def _running(url: str) -> int:
    return requests.get(f"{url}/get_server_info", timeout=10).json()["running"]


def _health_fails(url: str) -> bool:
    try:
        return requests.get(f"{url}/health", timeout=2).status_code != 200
    except requests.ConnectionError:
        return True


def _streamed_error(url: str, started: threading.Event) -> dict:
    """Stream a long generation; return the error event it ends with."""
    with requests.post(f"{url}/generate", stream=True, timeout=60,
                       json={"text": "stream", "stream": True, "sampling_params": LONG}) as r:
        for line in r.iter_lines():
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            event = json.loads(line[6:])
            started.set()
            if "error" in event:
                return event
    raise AssertionError("the stream ended without an error event")


def test_killed_scheduler_fails_requests_health_and_exits_the_server(
        start_live_server, tiny_llama_path):
    server = start_live_server("--model-path", str(tiny_llama_path))
    url = server.url
    scheduler_pid = requests.get(f"{url}/get_server_info", timeout=10).json()[
        "process_ids"]["scheduler"]
    started = threading.Event()
    with ThreadPoolExecutor(4) as pool:
        plain = [pool.submit(requests.post, f"{url}/generate", timeout=60,
                             json={"text": f"plain {i}", "sampling_params": LONG})
                 for i in range(2)]
        streamed = pool.submit(_streamed_error, url, started)
        _poll(lambda: started.is_set() and _running(url) == 3, "3 requests running")
        os.kill(scheduler_pid, signal.SIGKILL)
        for f in plain:
            r = f.result()
            assert r.status_code == 500, r.text
            assert "scheduler process" in r.json()["error"]["message"]
        assert "SIGKILL" in streamed.result()["error"]["message"]
    _poll(lambda: _health_fails(url), "/health fails")
    _poll(lambda: server.proc.poll() is not None, "the server exits")
    assert server.proc.returncode == 1
    log = server.log.read_text()
    assert (f"scheduler process exited: killed by SIGKILL (exit code -9, pid {scheduler_pid})"
            in log)
    assert "the HTTP server exits with code 1" in log
