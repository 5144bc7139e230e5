"""Clients that go away, and aborts: quiet logs, counted in metrics, every sequence freed."""

from __future__ import annotations

import json
import re
import socket
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlparse

import pytest
import requests

POLLS = 300  # x 0.1 s while waiting for the scheduler to pick up or drop requests
LONG = {"max_new_tokens": 2000, "ignore_eos": True}


@pytest.fixture(scope="module")
def served(tiny_llama_path, start_server):
    url = start_server("--model-path", str(tiny_llama_path), "--page-size", "4")
    return url, start_server.logs[url]


def running(url: str) -> int:
    return requests.get(f"{url}/server_info", timeout=30).json()["running"]


def wait_running(url: str, want: int) -> None:
    for _ in range(POLLS):
        if running(url) == want:
            return
        time.sleep(0.1)
    pytest.fail(f"running never became {want} (now {running(url)})")


def requests_total(url: str, status: str) -> float:
    text = requests.get(f"{url}/metrics", timeout=30).text
    found = re.search(rf'^radixlm_requests_total{{status="{status}"}} (\S+)$', text, re.M)
    return float(found.group(1)) if found else 0.0


def send_then_hang_up(url: str, body: dict) -> None:
    """POST ``body`` to /generate on a raw socket; close it once the request is running."""
    where = urlparse(url)
    data = json.dumps(body).encode()
    with socket.create_connection((where.hostname, where.port)) as sock:
        sock.sendall(b"POST /generate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json"
                     b"\r\nContent-Length: %d\r\n\r\n%s" % (len(data), data))
        wait_running(url, 1)
    wait_running(url, 0)


@pytest.mark.parametrize("stream", [False, True])
def test_a_disconnect_is_counted_and_logs_no_traceback(served, stream):
    url, log = served
    before = requests_total(url, "cancelled")
    send_then_hang_up(url, {"text": "bye", "stream": stream, "sampling_params": LONG})
    assert requests_total(url, "cancelled") == before + 1
    for _ in range(3):  # more work, so that anything left pending would be collected
        assert requests.post(f"{url}/generate", json={"text": "canary"}, timeout=60).ok
    text = log.read_text()
    assert "Traceback" not in text and "Task was destroyed" not in text, text[-3000:]


def test_abort_request_with_the_rid_of_an_n_gt_1_request_aborts_every_sequence(served):
    url, _ = served
    body = {"text": "abc", "rid": "group-1", "sampling_params": {"n": 3, **LONG}}
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(requests.post, f"{url}/generate", json=body, timeout=300)
        wait_running(url, 3)
        assert requests.post(f"{url}/abort_request", json={"rid": "group-1"}, timeout=30).ok
        result = pending.result()
    assert result.status_code == 200, result.text
    reasons = [r["meta_info"]["finish_reason"]["type"] for r in result.json()]
    assert reasons == ["abort"] * 3
    wait_running(url, 0)
