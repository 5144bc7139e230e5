"""Speculative decoding without a draft model (``--speculative-algorithm NGRAM``) against plain
decoding, on the same loaded model in one run.

Rows, greedy, through the model's chat template: ``json`` (the demo's documents, the person
extracted under the demo's JSON schema: drafts from the grammar's forced text and the
document's text), ``rag`` (a ~1,500-token passage and a question whose answer quotes it,
batch 1), ``rag8`` (8 questions on that passage at once), ``chat`` (open-ended writing: little
to copy), ``streams32`` (32 open-ended streams at once; ``streams32_forced``: the same with
speculation allowed at batch 32, to measure the threshold), ``agent`` (a lang program: fork 2
tool-call JSON drafts + select, end to end, on one Engine: each document with speculation off
through the per-request opt-out, then on; no new document after ``--agent-budget`` seconds),
llama.cpp's own prompt-lookup decoding on the same GGUF and prompt ids for ``json`` and
``rag`` (batch 1), and ``draft_cost`` (not in the default tasks: a chat request made to
propose k drafts the model rejects, every step; the step's cost in plain decode steps, which
sizes ``runtime/speculative/draft_budget.py``).

Requests run through in-process :class:`Scheduler`s (no IPC), speculation off then on,
alternating, over one :class:`ModelRunner` (its KV pool shared; each has its own radix cache).
Per row: decode tokens per second (tokens emitted once every request has its first token,
over that time, by the wall clock and by this process's CPU time: the steadier on a shared
core), their ratios on/off, the mean acceptance length (tokens per verification), the accept
rate per draft source, and how many outputs are token-identical. Plain decoding keeps
jump-forward (the default), which a speculating request replaces by grammar drafts, so
``json`` outputs may differ where jump-forward's tokenization differs from the model's.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/speculative.py [--requests 3] [--new-tokens 96]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from bench_common import add_common_args, resolve_model, setup_threads, write_results
from speculative_rows import (
    failed_draft_cost,
    llama_cpp_lookup,
    long_passage,
    run_agent,
    run_together,
)

from radixlm.demo import DOCUMENTS, PERSON_SCHEMA, SYSTEM
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.messages import GrammarReq

CHAT_PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Give me three ideas for a rainy weekend, with a sentence on each.",
    "Explain why the sky is blue to a ten-year-old.",
    "Describe your ideal breakfast in a few sentences.",
]
TOPICS = ["a lighthouse", "a market", "a glacier", "a violin", "a forest", "a train",
          "a bakery", "a comet"]


def task_requests(tokenizer: Any, n: int) -> dict[str, list[tuple[list[int], GrammarReq | None]]]:
    """Per task, its (prompt ids, constraint) pairs (``n`` for the batch-1 tasks)."""

    def chat(system: str | None, user: str) -> list[int]:
        msgs = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user}]
        if getattr(tokenizer, "chat_template", None) is None:  # a base model (Gemma 3 270M)
            text = "".join(f"{m['role'].title()}: {m['content']}\n\n" for m in msgs)
            return list(tokenizer.encode(text + "Assistant:"))
        return list(tokenizer.apply_chat_template(msgs, add_generation_prompt=True,
                                                  tokenize=True, return_dict=False))

    schema = GrammarReq(json_schema=json.dumps(PERSON_SCHEMA))
    passage, questions = long_passage()
    rag = [(chat("Answer from the text, quoting it exactly.",
                 f"Text: {passage}\n\nQuestion: {q}"), None) for q in questions]
    streams = [(chat(None, f"{CHAT_PROMPTS[i % len(CHAT_PROMPTS)]} Mention "
                           f"{TOPICS[i % len(TOPICS)]}."), None) for i in range(32)]
    return {
        "json": [(chat(SYSTEM, doc), schema) for doc in DOCUMENTS[:n]],
        "rag": rag[:n], "rag8": rag[:8],
        "chat": [(chat(None, p), None) for p in CHAT_PROMPTS[:n]],
        "streams32": streams, "streams32_forced": streams,
    }


def spec_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    d = {k: after[k] - before[k] for k in after if k.startswith("spec_")
         and isinstance(after[k], int)}
    d["accept_length_mean"] = (d["spec_emitted_tokens"] / d["spec_verify_steps"]
                               if d["spec_verify_steps"] else 0.0)
    for src in ("grammar", "prompt_lookup", "text_lookup"):
        drafted = d[f"spec_draft_tokens_{src}"]
        d[f"accept_rate_{src}"] = d[f"spec_accepted_tokens_{src}"] / drafted if drafted else 0.0
    return d


BATCHED = ("rag8", "streams32", "streams32_forced")  # their requests run together


def run_task(task: str, reqs: list, plain: Scheduler, spec: Scheduler,
             new_tokens: int) -> dict[str, Any]:
    """One row: its requests off then on (together for a batched row, else one by one)."""
    groups = [reqs] if task in BATCHED else [[r] for r in reqs]
    rows: dict[str, list] = {"off": [], "on": []}
    before = spec.info()
    for i, group in enumerate(groups):
        rows["off"].append(run_together(plain, f"{task}{i}-off", group, new_tokens))
        rows["on"].append(run_together(spec, f"{task}{i}-on", group, new_tokens))
    rate = {k: sum(r["decode_tokens"] for r in v) / max(sum(r["decode_s"] for r in v), 1e-9)
            for k, v in rows.items()}
    cpu = {k: sum(r["decode_tokens"] for r in v) / max(sum(r["decode_cpu_s"] for r in v), 1e-9)
           for k, v in rows.items()}
    pairs = [(a, b) for x, y in zip(rows["off"], rows["on"]) for a, b in zip(x["ids"], y["ids"])]
    return {"decode_tok_s_off": rate["off"], "decode_tok_s_on": rate["on"],
            "ratio": rate["on"] / rate["off"] if rate["off"] else 0.0,
            "cpu_ratio": cpu["on"] / cpu["off"] if cpu["off"] else 0.0,
            "identical_outputs": sum(a == b for a, b in pairs), "requests": len(pairs),
            **spec_delta(before, spec.info())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, "speculative")
    parser.add_argument("--requests", type=int, default=3, help="requests per batch-1 task")
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--batch-new-tokens", type=int, default=32,
                        help="new tokens per request of rag8 and streams32")
    parser.add_argument("--num-draft-tokens", type=int, default=8)
    parser.add_argument("--max-batch", type=int, default=None,
                        help="--speculative-max-batch-size (default: the server's)")
    parser.add_argument("--quantization", default=None,
                        help="as the server's: default a GGUF's own blocks (SmolLM2's Q4_1), "
                             "none: dequantized to float32")
    parser.add_argument("--agent-budget", type=float, default=120.0,
                        help="seconds after which the agent row starts no new document")
    parser.add_argument("--tasks", default="json,rag,rag8,chat,streams32,agent,llama_cpp")
    args = parser.parse_args()
    setup_threads(args.threads)
    model = resolve_model(args.model)
    tokenizer, runner, common, spec_args, quantization = setup(args, model)
    plain = Scheduler(ServerArgs(**common), runner, tokenizer)
    spec = Scheduler(ServerArgs(**common, **spec_args), runner, tokenizer)
    prepare(plain, spec)
    results: dict[str, Any] = {"max_batch": spec.speculator.max_batch,
                               "quantization": quantization}
    reqs = task_requests(tokenizer, args.requests)
    for task in args.tasks.split(","):
        if task == "agent":
            r = agent_row(str(model.path), args.threads, spec_args, args.agent_budget)
        elif task == "draft_cost":
            r = failed_draft_cost(plain, spec, reqs["chat"][0][0], args.new_tokens)
        elif task == "llama_cpp":
            r = llama_row(str(model.path), args, reqs)
        else:
            s = spec if task != "streams32_forced" else Scheduler(ServerArgs(
                **common, **{**spec_args, "speculative_max_batch_size": 64}), runner, tokenizer)
            prepare(s)
            new = args.batch_new_tokens if task in BATCHED else args.new_tokens
            r = run_task(task, reqs[task], plain, s, new)
        results[task] = r
        print(task, json.dumps({k: round(v, 3) if isinstance(v, float) else v
                                for k, v in r.items() if "spec_" not in k}), flush=True)
    write_results(args.out, {"args": vars(args), "model": model.describe(), "results": results})


def setup(args: argparse.Namespace, model: Any) -> tuple[Any, ModelRunner, dict[str, Any],
                                                      dict[str, Any], str | None]:
    """The tokenizer, the loaded runner, the server arguments both sides share, those that
    turn speculation on (``args``: threads, quantization, draft tokens, max batch), and the
    runner's quantization (resolved as the server resolves it: the runner takes None as
    "float32 weights")."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model.hf_path)
    pool = 16384
    common = {"model_path": str(model.path), "max_total_tokens": pool,
              "num_threads": args.threads, "quantization": args.quantization}
    quantization = ServerArgs(**common).resolved_quantization[0]
    runner = ModelRunner(model.path, RunnerConfig(max_total_tokens=pool,
                                                  num_threads=args.threads,
                                                  quantization=quantization))
    spec_args = {"speculative_algorithm": "NGRAM",
                 "speculative_num_draft_tokens": args.num_draft_tokens}
    if args.max_batch is not None:
        spec_args["speculative_max_batch_size"] = args.max_batch
    return tokenizer, runner, common, spec_args, quantization


def prepare(*schedulers: Scheduler) -> None:
    """Build what the server's start-up builds (the grammar's token vocabulary, which text
    lookup decodes with): left lazy, its ~260 ms landed in the first RAG request's decode."""
    for s in schedulers:
        s.grammar.prepare()


def agent_row(path: str, threads: int, spec_args: dict[str, Any],
              budget_s: float) -> dict[str, Any]:
    """The agent program end to end on one Engine, each document with speculation off (the
    per-request opt-out) then on, within about ``budget_s`` seconds."""
    r = run_agent(path, threads, DOCUMENTS[:3], DOCUMENTS[-1], budget_s, **spec_args)
    return {"programs": r["programs"], "seconds_off": r["seconds_off"],
            "seconds_on": r["seconds_on"],
            "ratio": r["seconds_off"] / r["seconds_on"] if r["seconds_on"] else 0.0,
            "accept_length_mean": r["accept_length_mean"],
            "identical_outputs": sum(a == b for a, b in zip(r["outputs_off"], r["outputs_on"]))}


def llama_row(path: str, args: argparse.Namespace, reqs: dict) -> dict[str, Any]:
    """llama.cpp's prompt lookup on the json and rag rows' prompts (batch 1)."""
    if not path.endswith(".gguf"):
        return {"skipped": "llama.cpp needs the GGUF model"}
    out = {}
    for task in ("json", "rag"):
        prompts = [(ids, PERSON_SCHEMA if grammar is not None else None)
                   for ids, grammar in reqs[task]]
        for k, v in llama_cpp_lookup(path, args.threads, prompts, args.new_tokens,
                                     args.num_draft_tokens).items():
            out[f"{task}_{k}"] = v
    return out


if __name__ == "__main__":
    main()
