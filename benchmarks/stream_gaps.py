"""Pauses inside a stream: one constrained request at a time, the gaps between its chunks
beside the same prompt's unconstrained stream, through radixlm's Engine on a real model.

For ``--per-subset`` schemas of every corpus subset (the first that radixlm compiles), one
request streams at a time (greedy, ``--max-new-tokens``): first the prompt unconstrained
(``ignore_eos``, so it runs the whole budget), then with the schema. A gap is the time
between two chunks the client receives (the first chunk, the time to first token, is not
a gap; a jump-forward chunk may carry several tokens). Reported: gap p50 / p99 / max of
each side over all its gaps, the constrained minus the unconstrained, and the worst schemas.
The masks are cold (fresh process, no disk cache): the first time a stream reaches a state
is the case issue 43 names.

Usage (a quiet machine; one thread; figures go to docs/benchmarks.md with the processor)::

    taskset -c 0 python benchmarks/stream_gaps.py --model smollm2 --per-subset 2
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import json_decoding as jd
import json_e2e_engine
from bench_common import machine, resolve_model, write_results

DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "stream_gaps.json"


def stream_gaps(engine: Any, prompt: str, params: dict) -> tuple[list[float], str]:
    """The gaps (ms) between the chunks of one streamed request, and its final text."""
    stamps, text = [], ""
    for chunk in engine.generate(prompt, params, stream=True):
        stamps.append(time.perf_counter())
        text = chunk["text"]
    return [1e3 * (b - a) for a, b in zip(stamps, stamps[1:])], text


def summary(gaps: list[float]) -> dict[str, float]:
    """p50 / p99 / max of ``gaps`` (ms)."""
    ordered = sorted(gaps)
    return {"gaps": len(ordered), "p50": statistics.median(ordered),
            "p99": ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))],
            "max": ordered[-1]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--corpus", type=Path, default=jd.DEFAULT_CORPUS)
    p.add_argument("--per-subset", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--timeout", type=float, default=30.0, help="compile timeout, s")
    p.add_argument("--constrained-params", type=json.loads, default={},
                   help='more sampling params for the constrained side (JSON), e.g. '
                        '\'{"close_within_max_tokens": false}\'')
    p.add_argument("--engine-args", type=json.loads, default={},
                   help="more Engine arguments (JSON), e.g. '{\"grammar_mask_wait_ms\": 0}'")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = p.parse_args()
    if not args.corpus.is_dir():
        raise SystemExit(f"corpus not found at {args.corpus} (pass --corpus)")
    model = resolve_model(args.model)
    from transformers import AutoTokenizer

    from radixlm import Engine

    tokenizer = AutoTokenizer.from_pretrained(model.hf_path)
    subsets = sorted(d.name for d in args.corpus.iterdir() if d.is_dir())
    picked = []
    for subset in subsets:  # json_e2e_engine.pick's choice, a subset at a time
        one = argparse.Namespace(corpus=args.corpus, subsets=[subset],
                                 schemas=args.per_subset, timeout=args.timeout)
        picked += json_e2e_engine.pick(one, tokenizer)
    print(f"{len(picked)} schemas from {len(subsets)} subsets on {model.describe()}", flush=True)
    engine = Engine(str(model.path), num_threads=args.threads,
                    grammar_compile_timeout=args.timeout, **args.engine_args)
    free, bound, rows = [], [], []
    try:
        for name, schema in picked:
            prompt = f"Answer with one JSON value for this schema: {json.dumps(schema)[:300]}\n"
            base = {"temperature": 0.0, "max_new_tokens": args.max_new_tokens}
            g_free, _ = stream_gaps(engine, prompt, {**base, "ignore_eos": True})
            g_bound, text = stream_gaps(engine, prompt, {**base, "json_schema": json.dumps(schema),
                                                         **args.constrained_params})
            free += g_free
            bound += g_bound
            rows.append({"schema": name, "chunks": len(g_bound) + 1,
                         "max_ms": max(g_bound, default=0.0),
                         "max_free_ms": max(g_free, default=0.0), "chars": len(text)})
            print(f"{name:45s} chunks {len(g_bound) + 1:4d}  max gap "
                  f"{rows[-1]['max_ms']:7.1f} ms (unconstrained {rows[-1]['max_free_ms']:6.1f})",
                  flush=True)
    finally:
        engine.shutdown()
    s_free, s_bound = summary(free), summary(bound)
    print(f"\n{'':14s} {'gaps':>6} {'p50':>7} {'p99':>7} {'max':>7}  (ms)")
    for label, s in (("unconstrained", s_free), ("constrained", s_bound)):
        print(f"{label:14s} {s['gaps']:6d} {s['p50']:7.2f} {s['p99']:7.2f} {s['max']:7.1f}")
    print(f"difference: p99 {s_bound['p99'] - s_free['p99']:+.2f} ms (target <= 2), "
          f"max {s_bound['max'] - s_free['max']:+.1f} ms (target <= 10)")
    write_results(args.out, {"machine": machine(), "model": model.describe(),
                             "threads": args.threads, "unconstrained": s_free,
                             "constrained": s_bound, "schemas": rows})


if __name__ == "__main__":
    main()
