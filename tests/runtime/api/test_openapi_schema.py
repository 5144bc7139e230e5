"""``/openapi.json`` describes the API well enough to fuzz it: schemathesis, driven by the live
server's own schema, finds no 5xx, and the server is healthy afterwards."""

from __future__ import annotations

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings

EXAMPLES_PER_ROUTE = 15
API_KEY = "fuzz-key"
AUTH = {"Authorization": f"Bearer {API_KEY}"}


@pytest.fixture(scope="module")
def server(tiny_llama_path, start_server):
    # A short context keeps every generated request small (longer ones get 400).
    return start_server("--model-path", str(tiny_llama_path), "--context-length", "96",
                        "--api-key", API_KEY)


@pytest.fixture(scope="module")
def openapi(server) -> dict:
    r = requests.get(f"{server}/openapi.json", headers=AUTH, timeout=30)
    assert r.ok, r.text
    return r.json()


def test_operations_have_unique_ids_bodies_and_error_responses(openapi):
    ops = [(path, method, op) for path, item in openapi["paths"].items()
           for method, op in item.items()]
    ids = [op["operationId"] for _, _, op in ops]
    assert len(ids) == len(set(ids))
    for path, method, op in ops:
        assert {"401", "503"} <= set(op["responses"]), (path, method)
        if method in ("post", "put") and path != "/flush_cache":
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert ref.split("/")[-1] in openapi["components"]["schemas"]
            assert {"400", "413"} <= set(op["responses"]), (path, method)
    completion = openapi["components"]["schemas"]["CompletionRequest"]["properties"]
    assert completion["logprobs"]["anyOf"][0]["maximum"] == 5


def test_schemathesis_finds_no_server_error(server, openapi):
    schema = schemathesis.openapi.from_dict(openapi)
    failures: list[tuple[str, int, str]] = []
    labels = []
    for result in schema.get_all_operations():
        operation = result.ok()
        labels.append(operation.label)

        @settings(max_examples=EXAMPLES_PER_ROUTE, derandomize=True, deadline=None,
                  database=None, suppress_health_check=list(HealthCheck))
        @given(case=operation.as_strategy())
        def call(case: schemathesis.Case) -> None:
            r = case.call(base_url=server, headers=AUTH, timeout=120)
            if r.status_code >= 500:
                failures.append((case.operation.label, r.status_code, r.text[:300]))

        call()
    assert len(labels) == len(set(labels)) >= 10
    assert not failures, failures
    assert requests.get(f"{server}/health", timeout=30).ok
    assert requests.post(f"{server}/generate", headers=AUTH, timeout=60,
                         json={"text": "after", "sampling_params": {"max_new_tokens": 2}}).ok
