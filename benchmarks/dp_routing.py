"""Data-parallel routing on a shared-prefix workload: cache hit rate per policy.

Several documents, many questions each, interleaved (doc0 q0, doc1 q0, ..., doc0 q1, ...), sent
by a few client threads at once, greedy, a few output tokens each, on the built-in test Llama.
Runs one engine, then ``dp_size=2`` with cache_aware, round_robin and shortest_queue, and
reports for each the aggregate cache hit rate (cached prompt tokens / prompt tokens), how many
requests each replica got, and the largest in-flight imbalance seen at a routing decision
(cache_aware keeps it within ``--balance-abs-threshold``).

``--http``: the same over HTTP: two ``radixlm serve`` workers, the single engine being one of
them alone, and ``radixlm router --worker-urls`` in front of both for each policy (caches
flushed between runs); the router keys text by bytes and ids as sent (here: token ids).

    .venv/bin/python benchmarks/dp_routing.py [--docs 5] [--questions 6] [--clients 4] [--http]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import requests
import torch

from radixlm import env
from radixlm.router.dp_engine import DataParallelEngine
from radixlm.router.proxy import WORKER_HEADER
from radixlm.runtime.api.engine import Engine
from radixlm.runtime.wire.ipc import free_tcp_port
from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model
from radixlm.tiny_model.corpus import generate_corpus


def workload(tokenizer, docs: int, questions: int, doc_tokens: int, q_tokens: int
             ) -> list[list[int]]:
    """Prompts (token ids), interleaved across documents."""
    text = " ".join(d for d in generate_corpus(2000, seed=7) if not d.startswith("{"))
    ids = tokenizer(text, add_special_tokens=False).input_ids
    need = docs * doc_tokens + docs * questions * q_tokens
    if len(ids) < need:
        raise SystemExit(f"corpus too short: {len(ids)} < {need} tokens")
    bodies = [ids[i * doc_tokens:(i + 1) * doc_tokens] for i in range(docs)]
    qs = ids[docs * doc_tokens:]
    prompts = []
    for q in range(questions):
        for d in range(docs):
            k = q * docs + d
            prompts.append(bodies[d] + qs[k * q_tokens:(k + 1) * q_tokens])
    return prompts


def run(engine, prompts: list[list[int]], clients: int, new_tokens: int) -> dict:
    sampling = {"max_new_tokens": new_tokens, "temperature": 0.0, "ignore_eos": True}
    with ThreadPoolExecutor(clients) as pool:
        outs = list(pool.map(lambda p: engine.generate(input_ids=p, sampling_params=sampling),
                             prompts))
    cached = sum(o["meta_info"]["cached_tokens"] for o in outs)
    total = sum(o["meta_info"]["prompt_tokens"] for o in outs)
    ranks = [o["meta_info"].get("dp_rank", 0) for o in outs]
    return {"hit_rate": round(cached / total, 4),
            "per_replica": [ranks.count(r) for r in sorted(set(ranks))],
            "max_spread": getattr(engine, "max_spread", 0)}


class HttpFront:
    """``generate`` over HTTP, as the engines' (``dp_rank`` from the router's worker header)."""

    def __init__(self, url: str, workers: list[str]) -> None:
        self.url, self.workers = url, workers

    def generate(self, input_ids: list[int], sampling_params: dict) -> dict:
        resp = requests.post(self.url + "/generate", timeout=600, json={
            "input_ids": input_ids, "sampling_params": sampling_params})
        resp.raise_for_status()
        out = resp.json()
        worker = resp.headers.get(WORKER_HEADER, self.url)
        out["meta_info"]["dp_rank"] = self.workers.index(worker)
        return out

    @property
    def max_spread(self) -> int:
        if self.workers == [self.url]:
            return 0
        return requests.get(self.url + "/get_server_info", timeout=60).json()["max_spread"]


@contextmanager
def http_process(*argv: str) -> Iterator[str]:
    """``radixlm <argv> --port <free>``, healthy; its URL; stopped on exit."""
    port = free_tcp_port()
    proc = subprocess.Popen([sys.executable, "-m", "radixlm.cli", *argv, "--port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(3000):
            if proc.poll() is not None:
                raise SystemExit(f"radixlm {argv[0]} exited with {proc.returncode}")
            try:
                if requests.get(url + "/health", timeout=2).ok:
                    break
            except requests.ConnectionError:
                pass
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def run_http(path: str, args: argparse.Namespace, tokenizer) -> dict:
    """Every configuration over HTTP (see the module docstring)."""
    prompts = workload(tokenizer, args.docs, args.questions, args.doc_tokens, args.q_tokens)
    serve = ["serve", "--model-path", path, "--max-total-tokens", "8192"]
    results = {}
    with http_process(*serve) as w0, http_process(*serve) as w1:
        def flush() -> None:
            for w in (w0, w1):
                requests.post(w + "/flush_cache", timeout=60).raise_for_status()
        flush()
        results["single engine"] = run(HttpFront(w0, [w0]), prompts, args.clients,
                                       args.new_tokens)
        for policy in ("cache_aware", "round_robin", "shortest_queue"):
            flush()
            with http_process("router", "--worker-urls", w0, w1, "--policy", policy,
                              "--balance-abs-threshold",
                              str(args.balance_abs_threshold)) as router:
                results[f"router {policy}"] = run(HttpFront(router, [w0, w1]), prompts,
                                                  args.clients, args.new_tokens)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=5)  # odd: round robin must not align
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--doc-tokens", type=int, default=200)
    ap.add_argument("--q-tokens", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--balance-abs-threshold", type=int, default=8)
    ap.add_argument("--http", action="store_true",
                    help="over HTTP: radixlm router in front of two radixlm serve workers")
    args = ap.parse_args()
    torch.set_num_threads(env.num_threads_default())
    with tempfile.TemporaryDirectory() as tmp:
        path = str(ensure_tiny_model(TinyModelSpec(arch="llama", size="test"), tmp))
        if args.http:
            from transformers import AutoTokenizer

            results = run_http(path, args, AutoTokenizer.from_pretrained(path))
            print(json.dumps({"workload": vars(args), "results": results}, indent=1))
            return
        common = {"max_total_tokens": 8192}
        results = {}
        with Engine(model_path=path, **common) as single:
            prompts = workload(single.tokenizer, args.docs, args.questions, args.doc_tokens,
                               args.q_tokens)
            results["single engine"] = run(single, prompts, args.clients, args.new_tokens)
        for method in ("cache_aware", "round_robin", "shortest_queue"):
            with DataParallelEngine(path, dp_size=2, load_balance_method=method,
                                    balance_abs_threshold=args.balance_abs_threshold,
                                    **common) as dp:
                results[f"dp=2 {method}"] = run(dp, prompts, args.clients, args.new_tokens)
    print(json.dumps({"workload": vars(args), "results": results}, indent=1))
    base, ca = results["single engine"]["hit_rate"], results["dp=2 cache_aware"]["hit_rate"]
    rr = results["dp=2 round_robin"]["hit_rate"]
    print(f"cache_aware hit rate {ca:.3f} vs single {base:.3f} (gap {base - ca:+.3f}), "
          f"round_robin {rr:.3f}")


if __name__ == "__main__":
    main()
