"""Cold masks side by side: the same random-logit walks with and without short-reach masks.

Every schema of the chosen JSONSchemaBench subsets is compiled twice
(``CompileBudget.short_reach_masks`` on, "shared", and off, "plain"), warm-up off, so every
mask a walk needs is computed on first visit; both grammars are walked in lockstep (the same
sampled tokens: the masks must be identical, which is checked at every step) and each cold
mask is timed on the thread's CPU clock, the two variants alternating which goes first, the
garbage collector paused while walking (a collection inside one timed mask is noise between
the variants). Prints per subset: cold masks, their CPU-time p50 / p99 / max and total for
each variant, the ratio of totals, and the automaton rows built while walking (their CPU time
and share of the cold masks': the derivatives, the rest being the trie walk).

    python cold_masks.py --corpus ../../shared/jsonschemabench --tokenizer smollm2 \\
        --subsets Github_medium Github_hard JsonSchemaStore --per-subset 6
"""

from __future__ import annotations

import argparse
import gc
import os
import time
import warnings
from dataclasses import replace

import numpy as np
import torch
from json_decoding_support import (  # this folder (run as a script)
    add_walk_args,
    corpus_specs,
    sample,
)

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.testing.real_vocabularies import load_vocabulary

COLD = CompileBudget(warmup_states=0, background_warmup_states=0)
VARIANTS = ("shared", "plain")


def timed_mask(grammar, state: int, rows: list[float]  # noqa: ANN001
               ) -> tuple[np.ndarray, float | None]:
    """(mask words, CPU seconds if it was computed now, else None); the automaton rows built
    inside it are added to ``rows`` [2:] (see :func:`time_rows`)."""
    if grammar.mask_ready(state):
        return grammar.mask(state).numpy(), None
    before = rows[:2]
    start = time.thread_time()
    words = grammar.mask(state).numpy()
    spent = time.thread_time() - start
    rows[2] += rows[0] - before[0]
    rows[3] += rows[1] - before[1]
    return words, spent


def time_rows(grammar, tally: list[float]) -> None:  # noqa: ANN001
    """Add the CPU time and count of every automaton row ``grammar`` builds to ``tally``
    ([seconds, rows, seconds and rows inside timed masks]): how much of a cold mask is
    derivatives rather than the trie walk."""
    build = grammar.dfa._build_row

    def timed(state: int) -> None:
        start = time.thread_time()
        build(state)
        tally[0] += time.thread_time() - start
        tally[1] += 1

    grammar.dfa._build_row = timed


def walk_pair(grammars: dict, vocab_size: int, seed: int, max_steps: int,
              times: dict[str, list[float]], rows: dict[str, list[float]]) -> None:
    """One random-logit walk through both grammars in lockstep."""
    gen = torch.Generator().manual_seed(seed)
    matchers = {k: g.new_matcher() for k, g in grammars.items()}
    for step in range(max_steps):
        order = VARIANTS if (seed + step) % 2 else VARIANTS[::-1]
        words = {}
        for k in order:
            words[k], spent = timed_mask(grammars[k], matchers[k].state, rows[k])
            if spent is not None:
                times[k].append(spent)
        if not np.array_equal(words["shared"], words["plain"]):
            raise AssertionError(f"masks differ at step {step} (seed {seed})")
        token = sample(torch.from_numpy(words["shared"].copy()), vocab_size, gen)
        for m in matchers.values():
            if not m.accept_token(token):
                raise AssertionError("sampled token refused")
        if matchers["shared"].is_finished():
            return


def summary(values: list[float]) -> str:
    if not values:
        return "-"
    us = np.array(values) * 1e6
    return (f"{np.percentile(us, 50):.0f}/{np.percentile(us, 99):.0f}/{us.max():.0f} us, "
            f"total {us.sum() / 1e3:.1f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_walk_args(p, ["Github_medium", "Github_hard", "JsonSchemaStore"], max_steps=400)
    args = p.parse_args()
    torch.set_num_threads(1)
    trie_walk_kernel.warm()
    vocab = load_vocabulary(args.tokenizer, args.cache).vocab
    compilers = {k: GrammarCompiler(vocab, replace(COLD, short_reach_masks=k == "shared"))
                 for k in VARIANTS}
    print(f"{args.tokenizer}: {vocab.vocab_size} ids; load {os.getloadavg()[0]:.2f}")
    for subset in args.subsets:
        times: dict[str, list[float]] = {k: [] for k in VARIANTS}
        rows = {k: [0.0, 0, 0.0, 0] for k in VARIANTS}  # see time_rows
        for seed, spec in corpus_specs(args.corpus, subset, args.per_subset):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    grammars = {k: c.compile(spec) for k, c in compilers.items()}
                for k, g in grammars.items():
                    time_rows(g, rows[k])
                gc.collect()
                gc.disable()  # a collection inside a timed mask is noise between variants
                for w in range(args.walks):
                    walk_pair(grammars, vocab.vocab_size, 1000 * seed + w, args.max_steps,
                              times, rows)
            except GrammarError:
                continue
            finally:
                gc.enable()
        ratio = sum(times["plain"]) / max(sum(times["shared"]), 1e-9)
        print(f"{subset}: {len(times['shared'])} cold masks | shared {summary(times['shared'])}"
              f" | plain {summary(times['plain'])} | plain/shared {ratio:.2f}x", flush=True)
        for k in VARIANTS:
            print(f"  {k}: {rows[k][3]} automaton rows built in cold masks, {rows[k][2] * 1e3:.1f}"
                  f" ms ({100 * rows[k][2] / max(sum(times[k]), 1e-9):.0f}% of their time); "
                  f"{rows[k][1] - rows[k][3]} more outside them (accepting tokens)")
    print(f"load {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
