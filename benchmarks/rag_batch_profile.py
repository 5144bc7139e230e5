"""Where shared-prefix RAG all at once spends its time, phase by phase, on the real model.

The ``rag_batch`` row of ``cpu_speed.py`` (one ``--doc-tokens`` document, ``--questions``
questions of ``--question-tokens`` each, ``--new-tokens`` greedy tokens each) replayed straight
on a :class:`ModelRunner`, the way the scheduler runs it with a cold radix cache: the document
prefilled in chunks of ``--chunk`` tokens, then every question extended over the shared
document KV in batches of at most ``--chunk`` tokens, then the decode steps at batch
``questions`` (the first new token comes with the question's extend). Per phase: wall and
CPU seconds, the linears' share (each call timed, by implementation and row count) and the
rest (attention, norms, rotary, KV writes, metadata). Engine overheads (scheduling,
tokenizer and detokenizer hops) are what ``cpu_speed.py``'s figure adds on top.

    python benchmarks/rag_batch_profile.py [--mode gguf] [--repeats 2] [--compare-gather]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager

import torch
from bench_common import real_model_runner

from radixlm.kernels.reference import extend_attention
from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.forward_batch import ForwardBatch
from radixlm.runtime.model.model_runner import ModelRunner

Tally = dict[str, list[float]]  # "impl@rows" -> [calls, seconds]


@contextmanager
def linears_timed(tally: Tally) -> Iterator[None]:
    """Every :class:`ChosenLinear` call timed into ``tally`` meanwhile."""
    original = gemm_choice.ChosenLinear.forward

    def timed(self: gemm_choice.ChosenLinear, x: torch.Tensor) -> torch.Tensor:
        rows = x.shape[0]
        impl = self._only or (self._by_rows[rows] if rows < len(self._by_rows)
                              else self._largest)
        name = next(n for n, f in self._impls.items() if f is impl)
        start = time.thread_time()  # CPU time: torch runs on this thread (one thread)
        y = original(self, x)
        entry = tally.setdefault(f"{name}@{rows}", [0, 0.0])
        entry[0] += 1
        entry[1] += time.thread_time() - start
        return y
    gemm_choice.ChosenLinear.forward = timed  # type: ignore[method-assign]
    try:
        yield
    finally:
        gemm_choice.ChosenLinear.forward = original  # type: ignore[method-assign]


def _forward(runner: ModelRunner, table: torch.Tensor, seq_lens: list[int],
             ext_lens: list[int], ids: list[int]) -> torch.Tensor:
    n = len(seq_lens)
    return runner.forward(ForwardBatch.from_table(
        seq_slots=table, seq_lens=torch.tensor(seq_lens), ext_lens=torch.tensor(ext_lens),
        input_ids=ids, logits_starts=torch.full((n,), -1), device=runner.device,
        max_context=runner.max_context, page_size=runner.config.page_size,
        workspace=runner.workspace))


def replay(runner: ModelRunner, args: argparse.Namespace) -> dict[str, dict]:
    """One cold run of the RAG batch: per phase wall and CPU seconds, the linears' CPU
    seconds (total and by implementation and row count) and the rest's."""
    gen = torch.Generator().manual_seed(0)
    vocab = runner.model_config.vocab_size
    doc = torch.randint(100, vocab, (args.doc_tokens,), generator=gen).tolist()
    total = args.doc_tokens + args.question_tokens + args.new_tokens
    doc_slots = runner.allocator.extend_slots([], args.doc_tokens, True)[0]
    own = [runner.allocator.extend_slots(doc_slots, total - args.doc_tokens, False)[0]
           for _ in range(args.questions)]
    rows = [list(doc_slots) + list(o) for o in own]
    phases: dict[str, dict] = {}

    def phase(name: str, steps: list[tuple[list[int], list[int], list[int], list[int]]]) -> None:
        tally: Tally = {}
        wall, cpu = time.perf_counter(), time.thread_time()
        with linears_timed(tally):
            for which, seq_lens, ext_lens, ids in steps:
                _forward(runner, torch.tensor([rows[q] for q in which]), seq_lens, ext_lens, ids)
        wall, cpu = time.perf_counter() - wall, time.thread_time() - cpu
        lin = sum(s for _, s in tally.values())
        phases[name] = {"wall_s": wall, "cpu_s": cpu, "linears_cpu_s": lin,
                        "rest_cpu_s": cpu - lin,
                        "by_impl": {k: round(v[1], 4) for k, v in sorted(tally.items())}}

    chunks = [(start, min(start + args.chunk, args.doc_tokens))
              for start in range(0, args.doc_tokens, args.chunk)]
    phase("doc_prefill", [([0], [stop], [stop - start], doc[start:stop])
                          for start, stop in chunks])
    per_batch = max(1, args.chunk // args.question_tokens)
    qsteps = []
    for first in range(0, args.questions, per_batch):
        which = list(range(first, min(first + per_batch, args.questions)))
        ids = torch.randint(100, vocab, (len(which) * args.question_tokens,),
                            generator=gen).tolist()
        length = args.doc_tokens + args.question_tokens
        qsteps.append((which, [length] * len(which), [args.question_tokens] * len(which), ids))
    phase("question_extends", qsteps)
    everyone = list(range(args.questions))
    phase("decode", [(everyone, [args.doc_tokens + args.question_tokens + t] * args.questions,
                      [1] * args.questions, [5] * args.questions)
                     for t in range(1, args.new_tokens)])
    for o in own:
        runner.allocator.free(pages_of(o, runner.config.page_size))
    runner.allocator.free(pages_of(doc_slots, runner.config.page_size))
    return phases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="gguf", choices=("float32", "int8", "int4", "gguf"))
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--doc-tokens", type=int, default=1552)
    parser.add_argument("--questions", type=int, default=32)
    parser.add_argument("--question-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--chunk", type=int, default=512, help="chunked prefill size")
    parser.add_argument("--compare-gather", action="store_true",
                        help="side by side, runs taking turns: extend attention gathering "
                             "every key (the code before pool views) against pool views")
    parser.add_argument("--cprofile", type=int, default=0,
                        help="also print this many functions by cumulative CPU time")
    args = parser.parse_args()
    torch.set_num_threads(1)
    start = time.perf_counter()
    runner = real_model_runner(args.mode)
    load_s = time.perf_counter() - start
    plans = defaultdict(list)
    for name, mod in runner.model.named_modules():
        if isinstance(mod, gemm_choice.ChosenLinear) and ".0." in f".{name}.":
            plans[name].append(str(mod.plan.choices))
    with torch.inference_mode():
        runs, gathered = [], []
        for _ in range(args.repeats):  # the two take turns: load bursts hit both alike
            runs.append(replay(runner, args))
            if args.compare_gather:
                gathered.append(gathering(replay, runner, args))
    if args.cprofile:
        import cProfile
        import pstats

        prof = cProfile.Profile(time.thread_time)
        with torch.inference_mode():
            prof.runcall(replay, runner, args)
        pstats.Stats(prof).sort_stats("cumulative").print_stats(args.cprofile)
    best = _best(runs)
    out = {"mode": args.mode, "load_s": round(load_s, 1), "load_avg_1min": os.getloadavg()[0],
           "layer0_plans": plans, "total_wall_s": sum(f["wall_s"] for f in best.values()),
           "total_cpu_s": sum(f["cpu_s"] for f in best.values()), "phases": best}
    if gathered:
        out["gathered_cpu_s"] = {p: f["cpu_s"] for p, f in _best(gathered).items()}
    print(json.dumps(out, indent=1))


def _best(runs: list[dict[str, dict]]) -> dict[str, dict]:
    """Per phase the run with the least CPU time (interruptions only add time)."""
    return {p: min((r[p] for r in runs), key=lambda f: f["cpu_s"]) for p in runs[0]}


def gathering(fn, *args):  # noqa: ANN001, ANN201 - a pass-through
    """``fn(*args)`` with extend attention gathering every key row (no pool views)."""
    original = extend_attention._pool_rows

    def gather(cache: torch.Tensor, slots: torch.Tensor) -> torch.Tensor:
        return cache.view(-1, cache.shape[2], cache.shape[3]).index_select(0, slots)
    extend_attention._pool_rows = gather
    try:
        return fn(*args)
    finally:
        extend_attention._pool_rows = original


if __name__ == "__main__":
    main()
