"""The grammar work on the caller's thread besides masks: accepting a token, planning a jump.

The scheduler's mask gate keeps cold masks off the step (``json_decoding.py --forward-ms``,
``json_e2e.py --scheduler``), but after sampling, the scheduler itself accepts each token
(``GrammarMatcher.accept_token``) and plans jump-forward, and either may build automaton rows:
a state whose mask came through its clamped key (a bounded string) has not had its own rows
built. This walks JSONSchemaBench schemas as ``json_decoding.py`` does (random logits over
the allowed tokens, jump-forward on, the default compile budget with the background warm-up
off: the worst case, nothing else fills rows meanwhile) and times every accept and every jump
plan on the thread's CPU clock, with the automaton rows each built (``cold_masks.time_rows``).
Prints per kind: count, p50 / p99 / max ms, how many built rows, and those ones' share of the
time.

    python grammar_advance.py --corpus ../../shared/jsonschemabench --tokenizer smollm2 \\
        --subsets Github_hard JsonSchemaStore --per-subset 6
"""

from __future__ import annotations

import argparse
import time
import warnings
from functools import partial

import numpy as np
import torch
from cold_masks import time_rows  # this folder (run as a script)
from json_decoding_support import add_walk_args, corpus_specs, sample

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError, jump_forward
from radixlm.fsm.tokens import trie_walk_kernel
from radixlm.testing.real_vocabularies import RealVocabulary, load_vocabulary


def timed(rows: list[float], into: list[tuple[float, int]], fn, *fn_args):  # noqa: ANN001, ANN201
    """``fn(*fn_args)``, its CPU time and the rows it built appended to ``into``."""
    before = rows[1]
    start = time.thread_time()
    out = fn(*fn_args)
    into.append((time.thread_time() - start, int(rows[1] - before)))
    return out


def walk(grammar, tokenizer: RealVocabulary, seed: int, max_steps: int, rows: list[float],  # noqa: ANN001
         accepts: list[tuple[float, int]], jumps: list[tuple[float, int]]) -> None:
    """One random-logit walk with jump-forward, timing accepts and jump plans."""
    vocab = tokenizer.vocab
    gen = torch.Generator().manual_seed(seed)
    matcher, out = grammar.new_matcher(), []

    def extendable(t: int) -> bool:
        return bool(vocab.extendable[t])

    for _ in range(max_steps):
        plan = timed(rows, jumps, partial(jump_forward, extendable=extendable), matcher, out,
                     tokenizer.encode, tokenizer.decode)
        if plan is not None:
            out = out[: len(out) - plan.rollback] + list(plan.tokens)
            continue
        words = grammar.mask(matcher.state).numpy().copy()
        token = sample(torch.from_numpy(words), vocab.vocab_size, gen)
        if not timed(rows, accepts, matcher.accept_token, token):
            raise AssertionError("sampled token refused")
        if matcher.is_finished():
            return
        out.append(token)


def report(name: str, values: list[tuple[float, int]]) -> None:
    ms = np.array([v[0] for v in values]) * 1e3
    built = np.array([v[1] for v in values]) > 0
    print(f"{name}: {ms.size}, p50 / p99 / max {np.percentile(ms, 50):.3f} / "
          f"{np.percentile(ms, 99):.3f} / {ms.max():.3f} ms; {built.sum()} built automaton "
          f"rows ({sum(v[1] for v in values)} rows), {ms[built].sum():.1f} of {ms.sum():.1f} ms")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_walk_args(p, ["Github_hard", "JsonSchemaStore"], max_steps=300)
    args = p.parse_args()
    torch.set_num_threads(1)
    trie_walk_kernel.warm()
    tokenizer = load_vocabulary(args.tokenizer, args.cache)
    compiler = GrammarCompiler(tokenizer.vocab, CompileBudget(background_warmup_states=0))
    accepts: list[tuple[float, int]] = []
    jumps: list[tuple[float, int]] = []
    for subset in args.subsets:
        for seed, spec in corpus_specs(args.corpus, subset, args.per_subset):
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    grammar = compiler.compile(spec)
            except GrammarError:
                continue
            rows = [0.0, 0, 0.0, 0]
            time_rows(grammar, rows)
            for w in range(args.walks):
                walk(grammar, tokenizer, 1000 * seed + w, args.max_steps, rows, accepts, jumps)
    report("accept_token", accepts)
    report("jump-forward plan", jumps)


if __name__ == "__main__":
    main()
