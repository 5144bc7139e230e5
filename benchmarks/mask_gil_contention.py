"""Does the compiler's worker, computing masks in Python, stall the scheduler's fill loop?

A scheduler-like thread sleeps (a forward: the GIL released), then times a 12-row fill loop
of ready masks, 400 times; meanwhile the compiler's worker warms up masks of hard corpus
schemas nonstop (``busy``) or does nothing (``idle``). Run it under both interpreter switch
intervals to see what the scheduler's 0.2 ms setting buys (grammar_manager.GIL_SWITCH_SECONDS):

    python benchmarks/mask_gil_contention.py --corpus ../shared/jsonschemabench
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import warnings
from pathlib import Path

import json_decoding as jd
import numpy as np

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError, GrammarSpec
from radixlm.testing.real_vocabularies import load_vocabulary

SUBSETS = ("Github_hard", "MCPspec", "BFCL_multiple", "Github_medium")


def grammars(corpus: Path, vocab) -> list:  # noqa: ANN001
    compiler = GrammarCompiler(vocab, CompileBudget(background_warmup_states=0))
    out = []
    for sub in SUBSETS:
        for path in sorted((corpus / sub).glob("*.json"))[:4]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    out.append(compiler.compile(GrammarSpec.json_schema(
                        json.loads(path.read_text())["schema"])))
                except GrammarError:
                    pass
    return out


def run(switch: float, busy: bool, gs: list, num_words: int) -> str:
    sys.setswitchinterval(switch)
    matchers = [g.new_matcher() for g in gs[:12]]
    for m in matchers:
        m.grammar.mask(m.state)
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            for g in gs:
                if stop.is_set():
                    return
                try:
                    g.warm_up(1, float("inf"), polite=True)
                except GrammarError:
                    pass

    if busy:
        threading.Thread(target=worker, daemon=True).start()
    rows = np.zeros((len(matchers), num_words), dtype=np.int32)
    waits = []
    for _ in range(400):
        time.sleep(0.02)
        start = time.perf_counter()
        for k, m in enumerate(matchers):
            m.fill_bitmask(rows[k])
        waits.append(time.perf_counter() - start)
    stop.set()
    w = 1e3 * np.array(waits)
    return (f"switch {switch * 1e3:.1f} ms, worker {'busy' if busy else 'idle'}: fill loop "
            f"p50 {np.percentile(w, 50):.3f} p99 {np.percentile(w, 99):.3f} max {w.max():.3f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--corpus", type=Path, default=jd.DEFAULT_CORPUS)
    p.add_argument("--tokenizer", default="smollm2")
    args = p.parse_args()
    vocab = load_vocabulary(args.tokenizer).vocab
    gs = grammars(args.corpus, vocab)
    for switch in (0.005, 0.0002):
        for busy in (False, True):
            print(run(switch, busy, gs, vocab.num_words), flush=True)


if __name__ == "__main__":
    main()
