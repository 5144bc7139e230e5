"""Closing within max_new_tokens over the local JSONSchemaBench corpus: for each schema's first
valid instance, budgets of its own token length and 10% / 50% shorter; a uniform random
adversary (never heads for an end) decodes under masks cut to the budget. Reports, per
subset, the runs refused (budget below the grammar's bound: the server's 400), and of the
others the share that ended complete and valid (``jsonschema``): it should be 100%.

    python benchmarks/budget_closing.py --per-subset 5
    python benchmarks/budget_closing.py --tokenizer tiny --subsets Handwritten JME
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import json_decoding as jd  # the corpus path is shared
import torch

from radixlm.fsm import CompileBudget, GrammarCompiler
from radixlm.testing.closing_walk import SHARES, budget_cases
from radixlm.testing.real_vocabularies import NAMES, load_vocabulary


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=jd.DEFAULT_CORPUS)
    p.add_argument("--subsets", nargs="*", default=None, help="subset names (default: all)")
    p.add_argument("--per-subset", type=int, default=5, help="schemas per subset (0: all)")
    p.add_argument("--tokenizer", choices=NAMES, default="smollm2", help="vocabulary")
    p.add_argument("--timeout", type=float, default=10.0, help="compile budget per schema (s)")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "radixlm-bench")
    args = p.parse_args()
    torch.set_num_threads(1)
    real = load_vocabulary(args.tokenizer, args.cache)
    compiler = GrammarCompiler(real.vocab, CompileBudget(max_seconds=args.timeout,
                                                         background_warmup_states=0),
                               memory_cache_size=1)
    subsets = sorted(d for d in args.corpus.iterdir() if d.is_dir())
    if args.subsets is not None:
        subsets = [d for d in subsets if d.name in args.subsets]
    totals = {s: [0, 0, 0, 0] for s in SHARES}  # runs, refused, closed, valid
    failures = []
    for subset in subsets:
        files = sorted(subset.glob("*.json"))[: args.per_subset or None]
        start = time.perf_counter()
        per = {s: [0, 0, 0, 0] for s in SHARES}
        for path in files:
            for case in budget_cases(path, compiler, real.encode, real.decode):
                row = per[case.share]
                row[0] += 1
                row[1] += case.refused
                row[2] += case.closed
                row[3] += case.valid
                if not case.refused and not case.valid:
                    failures.append(case)
        cells = "  ".join(_cell(share, per[share]) for share in SHARES)
        print(f"{subset.name:24} {cells}  ({time.perf_counter() - start:.0f} s)", flush=True)
        for share in SHARES:
            totals[share] = [a + b for a, b in zip(totals[share], per[share], strict=True)]
    print(f"{'total':24} " + "  ".join(_cell(s, totals[s]) for s in SHARES))
    for case in failures[:10]:
        print("not closed valid:", case)


def _cell(share: float, row: list[int]) -> str:
    runs, refused, closed, valid = row
    tried = runs - refused
    rate = f"{valid / tried:6.1%}" if tried else "    - "
    return f"{share:.0%}: {runs:3d} runs {refused:3d} refused, valid {valid:3d}/{tried:<3d} {rate}"


if __name__ == "__main__":
    main()
