"""Merged /metrics: each worker's samples labelled with it, one header per family, parseable."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from radixlm.router.metrics_merge import merge_metrics


def worker_text(requests: int) -> str:
    registry = CollectorRegistry()
    Counter("radixlm_requests", "Finished", ["status"], registry=registry).labels("ok").inc(
        requests)
    Histogram("radixlm_ttft_seconds", "TTFT", buckets=(0.1, 1), registry=registry).observe(0.5)
    return generate_latest(registry).decode()


def test_workers_samples_are_labelled_and_families_appear_once():
    own = [("radixlm_router_worker_up", "gauge", "in rotation",
            ['radixlm_router_worker_up{worker="http://a:1"} 1'])]
    text = merge_metrics({"http://a:1": worker_text(2), "http://b:1": worker_text(5)}, own)
    assert text.count("# TYPE radixlm_requests_total counter") == 1
    assert text.count("# TYPE radixlm_ttft_seconds histogram") == 1
    families = {f.name: f for f in text_string_to_metric_families(text)}
    totals = {s.labels["worker"]: s.value for s in families["radixlm_requests"].samples
              if s.name == "radixlm_requests_total"}
    assert totals == {"http://a:1": 2.0, "http://b:1": 5.0}
    buckets = [s for s in families["radixlm_ttft_seconds"].samples if s.name.endswith("_bucket")]
    assert {s.labels["worker"] for s in buckets} == {"http://a:1", "http://b:1"}
    assert families["radixlm_router_worker_up"].samples[0].value == 1
