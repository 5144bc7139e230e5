"""Data parallelism: a router in front of several engine replicas (docs/scale_out.md).

Pure routing (no I/O):

* :mod:`approx_tree` — per-replica radix tree of recently routed token ids.
* :mod:`policy` — cache_aware, round_robin, shortest_queue.
* :mod:`routing_key` — the key an HTTP request body is routed by (text bytes, token ids).
* :mod:`worker_pool` — the HTTP router's workers: rotation, in-flight counts, rid holders.
* :mod:`metrics_merge` — one Prometheus exposition from several workers'.

In-process: :mod:`dp_engine` — ``DataParallelEngine``, N engine replicas behind one API.

Over HTTP: :mod:`http_router` — ``radixlm router --worker-urls ...`` over running
``radixlm serve`` instances (:mod:`router_args`, :mod:`router_state`, :mod:`proxy`,
:mod:`worker_errors`); :mod:`dp_server` — ``radixlm serve --dp-size N``: N serve replicas
behind that router.

May import ``runtime.api`` (engines, HTTP helpers), ``runtime.wire`` (launching replicas),
``runtime.server_args``, ``dataclass_cli``, ``env`` and ``version``; the runtime never imports it.
"""
