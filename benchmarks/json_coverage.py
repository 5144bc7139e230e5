"""Declared coverage of radixlm.fsm over every schema of the local JSONSchemaBench corpus:
how many compile within the budget, per subset, and the most common refusal reasons.

    python benchmarks/json_coverage.py --timeout 20
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import warnings
from collections import Counter
from pathlib import Path

import json_decoding as jd  # the tokenizer and the corpus path are shared
import torch

from radixlm.fsm import (
    CompileBudget,
    GrammarCompiler,
    GrammarError,
    GrammarSpec,
    TokenVocabulary,
)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=jd.DEFAULT_CORPUS)
    p.add_argument("--timeout", type=float, default=20.0, help="compile budget per schema (s)")
    p.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "radixlm-bench")
    args = p.parse_args()
    torch.set_num_threads(1)
    tokenizer = jd.load_tokenizer(args.cache)
    vocab = TokenVocabulary.from_tokenizer(tokenizer, jd.MODEL_VOCAB, jd.EOS_IDS)
    compiler = GrammarCompiler(vocab, CompileBudget(max_seconds=args.timeout))
    reasons: Counter = Counter()
    total = [0, 0]
    for subset in sorted(d for d in args.corpus.iterdir() if d.is_dir()):
        files = sorted(subset.glob("*.json"))
        ok = 0
        for path in files:
            schema = json.loads(path.read_text())["schema"]
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    compiler.compile(GrammarSpec.json_schema(schema))
                ok += 1
            except GrammarError as exc:
                reasons[re.sub(r"'[^']*'", "'X'", str(exc))[:100]] += 1
        total[0] += ok
        total[1] += len(files)
        print(f"{subset.name:24} {ok:4d}/{len(files):<4d} {ok / max(len(files), 1):6.1%}")
    print(f"{'total':24} {total[0]:4d}/{total[1]:<4d} {total[0] / max(total[1], 1):6.1%}")
    for reason, n in reasons.most_common(12):
        print(f"{n:5d}  {reason}")


if __name__ == "__main__":
    main()
