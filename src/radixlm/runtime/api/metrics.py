"""Prometheus metrics for the HTTP server (``/metrics``, text exposition format).

Counters and histograms are fed by the tokenizer manager's finish hook; gauges (queue, running
requests, KV usage, cache hit rate) are read from the scheduler when ``/metrics`` is scraped.
Each server gets its own registry, so several servers (tests) can live in one process.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

logger = logging.getLogger("radixlm.requests")
# The scheduler's grammar time per step (masks + token advances, recent steps), milliseconds,
# the same less the time the OS kept the scheduler off the CPU (a loaded host's share), and
# the scheduler thread's CPU time in it: read from /get_server_info's keys of the same name.
GRAMMAR_STEP_GAUGES = tuple(
    (f"grammar_step_ms_{q}{own}", f"{label} of the scheduler's grammar time per step (masks "
                                  f"and token advances, recent steps{note}), ms")
    for own, note in (("", ""), ("_not_preempted", ", less the OS's preemption"),
                      ("_thread_cpu", ", the scheduler thread's CPU time"))
    for q, label in (("p50", "Median"), ("p99", "99th percentile"), ("max", "Longest")))
# Speculative decoding (--speculative-algorithm): read from /get_server_info's keys of the same
# name (0 while it is off).
SPECULATIVE_GAUGES = (
    ("spec_accept_length_mean", "Mean tokens per speculative verification (1: no draft "
                                "accepted)"),
    ("spec_accept_rate", "Share of draft tokens accepted"),
    ("spec_verify_steps", "Request-steps that verified draft tokens"),
    ("spec_accepted_tokens_prompt_lookup", "Draft tokens accepted from prompt lookup"),
    ("spec_accepted_tokens_grammar", "Draft tokens accepted from a constraint's forced text"),
    ("spec_accepted_tokens_cross_request", "Draft tokens accepted from finished requests' "
                                           "outputs"),
)
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("radixlm_requests", "Finished requests", ["status"], registry=r)
        self.prompt_tokens = Counter("radixlm_prompt_tokens", "Prompt tokens", registry=r)
        self.generation_tokens = Counter("radixlm_generation_tokens", "Generated tokens",
                                         registry=r)
        self.cached_tokens = Counter("radixlm_cached_prompt_tokens",
                                     "Prompt tokens served from the prefix cache", registry=r)
        self.ttft = Histogram("radixlm_time_to_first_token_seconds", "Time to first token",
                              buckets=LATENCY_BUCKETS, registry=r)
        self.itl = Histogram("radixlm_inter_token_latency_seconds",
                             "Mean time between output tokens, per request",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.e2e = Histogram("radixlm_e2e_request_latency_seconds", "End-to-end latency",
                             buckets=LATENCY_BUCKETS, registry=r)
        self.gauges = {
            name: Gauge(f"radixlm_{name}", help_text, registry=r)
            for name, help_text in (
                ("queue_length", "Requests waiting to be scheduled"),
                ("running_requests", "Requests being decoded or prefilled"),
                ("kv_usage", "Share of KV pages in use (running requests and cache)"),
                ("cache_hit_rate", "Share of prompt tokens served from the prefix cache"),
                ("kv_waste", "Share of allocated KV slots holding no live token"),
            ) + GRAMMAR_STEP_GAUGES + SPECULATIVE_GAUGES
        }

    def on_finish(self, summary: dict[str, Any]) -> None:
        """Finish hook: count the request and log one structured line."""
        self.requests.labels(status=summary["status"]).inc()
        latency = summary.get("latency", 0.0)
        self.e2e.observe(latency)
        n_out = summary.get("completion_tokens", 0) or 0
        self.prompt_tokens.inc(summary.get("prompt_tokens", 0) or 0)
        self.generation_tokens.inc(n_out)
        self.cached_tokens.inc(summary.get("cached_tokens", 0) or 0)
        ttft = summary.get("ttft")
        if ttft is not None:
            self.ttft.observe(ttft)
            if n_out > 1:
                self.itl.observe(max(latency - ttft, 0.0) / (n_out - 1))
        logger.info(json.dumps({k: summary.get(k) for k in (
            "rid", "status", "prompt_tokens", "cached_tokens", "completion_tokens",
            "finish_reason", "ttft", "latency")}, default=str))

    def update_gauges(self, info: dict[str, Any]) -> None:
        self.gauges["queue_length"].set(info.get("waiting", 0))
        self.gauges["running_requests"].set(info.get("running", 0))
        self.gauges["kv_usage"].set(info.get("kv_usage", 0.0))
        self.gauges["cache_hit_rate"].set(info.get("cache_hit_rate", 0.0))
        self.gauges["kv_waste"].set(info.get("kv_waste", 0.0))
        for name, _ in GRAMMAR_STEP_GAUGES + SPECULATIVE_GAUGES:
            self.gauges[name].set(info.get(name, 0.0))

    def render(self) -> bytes:
        return generate_latest(self.registry)
