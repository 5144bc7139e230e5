"""Data-parallel routing on a shared-prefix workload: cache hit rate per policy.

Several documents, many questions each, interleaved (doc0 q0, doc1 q0, ..., doc0 q1, ...), sent
by a few client threads at once, greedy, a few output tokens each, on the built-in test Llama.
Runs one engine, then ``dp_size=2`` with cache_aware, round_robin and shortest_queue, and
reports for each the aggregate cache hit rate (cached prompt tokens / prompt tokens), how many
requests each replica got, and the largest in-flight imbalance seen at a routing decision
(cache_aware keeps it within ``--balance-abs-threshold``).

    .venv/bin/python benchmarks/dp_routing.py [--docs 5] [--questions 6] [--clients 4]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from concurrent.futures import ThreadPoolExecutor

import torch

from radixlm import env
from radixlm.router.dp_engine import DataParallelEngine
from radixlm.runtime.api.engine import Engine
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--docs", type=int, default=5)  # odd: round robin must not align
    ap.add_argument("--questions", type=int, default=6)
    ap.add_argument("--doc-tokens", type=int, default=200)
    ap.add_argument("--q-tokens", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=4)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--balance-abs-threshold", type=int, default=8)
    args = ap.parse_args()
    torch.set_num_threads(env.num_threads_default())
    with tempfile.TemporaryDirectory() as tmp:
        path = str(ensure_tiny_model(TinyModelSpec(arch="llama", size="test"), tmp))
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
