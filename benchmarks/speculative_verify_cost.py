"""What a verify forward costs against a plain decode step, by context and batch.

Straight on a :class:`ModelRunner` (no scheduler): ``--batch`` requests share a cached
``--prefix``-token document (plus 40 tokens of their own), and each runs ``1 + k`` new tokens
with logits for all of them (a verification of ``k`` drafts) or one token (a decode step).
Per ``(batch, prefix, k)``: the median forward time in this thread's CPU time (the steadier
figure on a shared core) over ``--reps`` forwards, the plain step's taking turns with the
verify's, and their ratio: what ``runtime/speculative/draft_budget.py``'s step cost model
should predict. ``--layouts``: the verify rows as one-token decodes (how the scheduler runs
them) and as one extend per request (how it did before).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/speculative_verify_cost.py [--mode gguf]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
from bench_common import real_model_runner

from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import ForwardBatch
from radixlm.runtime.model.model_runner import ModelRunner

OWN = 40  # each request's own tokens after the shared document (its question)


def timed_forward(runner: ModelRunner, rows: list[list[int]], length: int, new: int,
                  as_decodes: bool = False) -> float:
    """One forward of every request in ``rows`` (slot lists) at ``length`` tokens after the
    step, ``new`` of them new (all with logits): one extend per request, or with
    ``as_decodes`` one one-token decode per new token (the scheduler's verify layout,
    ``scheduling/step_batch.py``); its thread CPU seconds."""
    if as_decodes:
        rows = [r for r in rows for _ in range(new)]
        lens = [length - new + 1 + j for _ in range(len(rows) // new) for j in range(new)]
        new = 1
    else:
        lens = [length] * len(rows)
    n = len(rows)
    batch = ForwardBatch.from_table(
        seq_slots=torch.tensor([r[:length] for r in rows]),
        seq_lens=torch.tensor(lens), ext_lens=torch.full((n,), new),
        input_ids=[17] * (n * new), logits_starts=torch.full((n,), 0 if new > 1 else -1),
        device=runner.device, max_context=runner.max_context,
        page_size=runner.config.page_size, workspace=runner.workspace)
    start = time.thread_time()
    runner.forward(batch)
    return time.thread_time() - start


def measure(runner: ModelRunner, batch: int, prefix: int, ks: list[int], reps: int,
            as_decodes: bool) -> dict[str, float]:
    """Median plain and verify step times (ms) and ratios for one batch and prefix."""
    alloc = runner.allocator
    doc = alloc.extend_slots([], prefix, True)[0] if prefix else []
    own = [alloc.extend_slots(doc, OWN + max(ks) + 1, False)[0] for _ in range(batch)]
    rows = [list(doc) + list(o) for o in own]
    length = prefix + OWN
    timed_forward(runner, rows, length, OWN)  # the KV of the prompt (values do not matter)
    times: dict[str, list[float]] = {"plain": [], **{f"k{k}": [] for k in ks}}
    for _ in range(reps):
        times["plain"].append(timed_forward(runner, rows, length + 1, 1))
        for k in ks:
            times[f"k{k}"].append(timed_forward(runner, rows, length + 1 + k, 1 + k,
                                                as_decodes))
    for o in own:
        alloc.free(pages_of(o, runner.config.page_size))
    if doc:
        alloc.free(pages_of(doc, runner.config.page_size))
    med = {name: statistics.median(v) for name, v in times.items()}
    out = {"plain_ms": 1e3 * med["plain"]}
    for k in ks:
        out[f"k{k}_ms"] = 1e3 * med[f"k{k}"]
        out[f"k{k}_cost"] = med[f"k{k}"] / med["plain"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="gguf", choices=("float32", "int8", "int4", "gguf"))
    parser.add_argument("--batches", default="1,8")
    parser.add_argument("--prefixes", default="200,1552")
    parser.add_argument("--ks", default="1,3,8")
    parser.add_argument("--reps", type=int, default=15)
    parser.add_argument("--layouts", default="decodes,extend",
                        help="verify rows as one-token decodes (the scheduler's) or extends")
    args = parser.parse_args()
    torch.set_num_threads(1)
    runner = real_model_runner(args.mode)
    ks = [int(k) for k in args.ks.split(",")]
    results = {}
    with torch.inference_mode():
        for b in (int(x) for x in args.batches.split(",")):
            for p in (int(x) for x in args.prefixes.split(",")):
                for layout in args.layouts.split(","):
                    r = measure(runner, b, p, ks, args.reps, layout == "decodes")
                    results[f"batch{b}_prefix{p}_{layout}"] = r
                    print(f"batch {b} prefix {p} {layout}:",
                          json.dumps({k: round(v, 2) for k, v in r.items()}), flush=True)


if __name__ == "__main__":
    main()
