"""Declared coverage of radixlm.fsm over every schema of the local JSONSchemaBench corpus:
how many compile within the budget, per subset, the compile time p50 per subset, the most
common refusal reasons and the slowest refusals (time to refuse).

    python benchmarks/json_coverage.py --tokenizer smollm2 --timeout 20
    python benchmarks/json_coverage.py --subsets Handwritten --refusals refused.tsv
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
import warnings
from collections import Counter
from pathlib import Path

import json_decoding as jd  # the corpus path and percentiles are shared
import torch

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError, GrammarSpec
from radixlm.runtime.gc_policy import freeze_startup_heap
from radixlm.testing.real_vocabularies import NAMES, load_vocabulary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=jd.DEFAULT_CORPUS)
    p.add_argument("--subsets", nargs="*", default=None, help="subset names (default: all)")
    p.add_argument("--tokenizer", choices=NAMES, default="smollm2", help="vocabulary")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="outer wall-clock bound per schema (s); the verdict is counted in "
                        "work steps (--compile-steps)")
    p.add_argument("--compile-steps", type=int, default=CompileBudget().max_compile_steps,
                   help="compile step budget per schema (CompileBudget.max_compile_steps)")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "radixlm-bench")
    p.add_argument("--refusals", type=Path, default=None,
                   help="write one line per refused schema: file, seconds, reason")
    p.add_argument("--verbose", action="store_true", help="one line per schema as it ends")
    args = p.parse_args()
    torch.set_num_threads(1)
    vocab = load_vocabulary(args.tokenizer, args.cache).vocab
    # no background warm-up: it would compete with the next schema's compile for the CPU
    # no memory cache: every schema is new, and cached grammars would hold gigabytes
    compiler = GrammarCompiler(vocab, CompileBudget(max_seconds=args.timeout,
                                                    max_compile_steps=args.compile_steps,
                                                    background_warmup_states=0),
                               memory_cache_size=1)
    # every mask on the compiled trie walk, from the first: the numpy walk (used until numba
    # has loaded) builds rows in another order, so its step counts, and near the budgets its
    # outcomes, differ (Handwritten---object8: 2,236 steps vs 4.6 M); a timing-dependent mix
    # of the two would make the refusals depend on the machine again
    compiler.wait_started()
    # as the server does (scheduler_process): the vocabulary and compiler out of every later
    # collection's scan; unfrozen, full collections rescanned them during every compile
    # (Handwritten---object9: 4.2 s of its 8.6 s wall in the collector)
    freeze_startup_heap()
    reasons: Counter = Counter()
    # (seconds to refuse, file, reason, CPU seconds of this thread: the compile runs inline,
    # so on a loaded machine this is the work, the wall time the work plus the wait for a core)
    refused: list[tuple[float, str, str, float]] = []
    total = [0, 0]
    all_ms: list[float] = []
    subsets = sorted(d for d in args.corpus.iterdir() if d.is_dir())
    if args.subsets is not None:
        subsets = [d for d in subsets if d.name in args.subsets]
    for subset in subsets:
        files = sorted(subset.glob("*.json"))
        ok, ms = 0, []
        for path in files:
            schema = json.loads(path.read_text())["schema"]
            if args.verbose:
                print(f"{subset.name}/{path.name} ...", end=" ", flush=True)
            start, cpu = time.perf_counter(), time.thread_time()
            outcome = "ok"
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    compiler.compile(GrammarSpec.json_schema(schema))
                ok += 1
                ms.append((time.perf_counter() - start) * 1e3)
            except GrammarError as exc:
                reason = re.sub(r"'[^']*'", "'X'", str(exc))[:100]
                reasons[reason] += 1
                refused.append((time.perf_counter() - start, f"{subset.name}/{path.name}",
                                str(exc).replace("\n", " ")[:300], time.thread_time() - cpu))
                outcome = f"refused: {str(exc)[:120]}"
            if args.verbose:
                print(f"{time.perf_counter() - start:.2f} s {outcome}", flush=True)
        total[0] += ok
        total[1] += len(files)
        all_ms += ms
        p50 = jd.percentile(ms, 50)
        print(f"{subset.name:24} {ok:4d}/{len(files):<4d} {ok / max(len(files), 1):6.1%}"
              f"  compile p50 {p50 or 0:8.1f} ms", flush=True)
    print(f"{'total':24} {total[0]:4d}/{total[1]:<4d} {total[0] / max(total[1], 1):6.1%}"
          f"  compile p50 {jd.percentile(all_ms, 50) or 0:8.1f} ms")
    for reason, n in reasons.most_common(20):
        print(f"{n:5d}  {reason}")
    refused.sort(reverse=True)
    print("slowest refusals (s):", ", ".join(f"{r[1]} {r[0]:.2f}" for r in refused[:5]))
    for label, col in (("wall", 0), ("cpu", 3)):
        times = [r[col] for r in refused]
        print(f"refusal {label} s: " + ", ".join(
            f"p{q} {jd.percentile(times, q) or 0:.2f}" for q in (50, 90, 99))
            + f", max {max(times, default=0):.2f}, over 1 s: {sum(t > 1 for t in times)}")
    if args.refusals is not None:  # the CPU column last: readers of the first three unchanged
        args.refusals.write_text("".join(f"{name}\t{s:.3f}\t{why}\t{cpu:.3f}\n"
                                         for s, name, why, cpu in refused))


if __name__ == "__main__":
    main()
