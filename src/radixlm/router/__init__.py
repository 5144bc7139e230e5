"""Data parallelism: a router in front of several engine replicas (docs/scale_out.md).

* :mod:`approx_tree` — per-replica radix tree of recently routed token ids (pure).
* :mod:`policy` — cache_aware, round_robin, shortest_queue (pure).
* :mod:`dp_engine` — ``DataParallelEngine``: N in-process engine replicas behind one API.
* :mod:`http_router` — ``radixlm router --worker-urls ...`` over running ``radixlm serve``.
"""
