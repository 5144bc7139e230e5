"""Speculative decoding without a draft model (``--speculative-algorithm NGRAM``) against plain
decoding, batch 1, on the same loaded model in one run.

Three tasks, greedy, through the model's chat template: ``json`` (the demo's documents, the
person extracted under the demo's JSON schema: drafts from the grammar's forced text and the
document), ``rag`` (a passage and a question whose answer quotes it: prompt lookup), ``chat``
(open-ended writing: little to copy). Each request runs through an in-process
:class:`Scheduler` (no IPC) with speculation off, then on, alternating, two schedulers over
one :class:`ModelRunner` (its KV pool shared; each has its own radix cache). Per task: decode
tokens per second (output tokens after the first over the time from the first token to the
last), their ratio on/off, the mean acceptance length (tokens per verification), the accept
rate per draft source, and how many outputs are token-identical. Plain decoding keeps
jump-forward (the default), which a speculating request replaces by grammar drafts, so ``json``
outputs may differ where jump-forward's tokenization differs from the model's.

    OMP_WAIT_POLICY=PASSIVE python benchmarks/speculative.py [--requests 3] [--new-tokens 96]
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from bench_common import add_common_args, resolve_model, setup_threads, write_results

from radixlm.demo import DOCUMENTS, PERSON_SCHEMA, SYSTEM
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.messages import GenerateReq, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams

PASSAGE = (
    "The Lindqvist Observatory was built in 1911 on a granite ridge above the village of "
    "Hallen. Its first director, Marta Lindqvist, ordered a 60-centimetre refracting "
    "telescope from a workshop in Hamburg, and the instrument arrived by ox cart in the "
    "spring of 1912. For four decades the observatory measured the positions of double "
    "stars, and its catalogue of 2,340 pairs was published in 1954. The dome was restored in "
    "1998 after a storm tore away part of its copper roof, and today the building houses a "
    "small museum that is open on Saturdays from May to September."
)
RAG_QUESTIONS = [
    "Quote the sentence that says when and how the telescope arrived.",
    "Quote the sentence about the catalogue of double stars.",
    "Quote the sentence about the restoration of the dome.",
]
CHAT_PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Give me three ideas for a rainy weekend, with a sentence on each.",
    "Explain why the sky is blue to a ten-year-old.",
]


def task_requests(tokenizer: Any, n: int) -> dict[str, list[tuple[list[int], GrammarReq | None]]]:
    """Per task, ``n`` (prompt ids, constraint) pairs."""

    def chat(system: str | None, user: str) -> list[int]:
        msgs = ([{"role": "system", "content": system}] if system else []) + [
            {"role": "user", "content": user}]
        return list(tokenizer.apply_chat_template(msgs, add_generation_prompt=True,
                                                  tokenize=True, return_dict=False))

    schema = GrammarReq(json_schema=json.dumps(PERSON_SCHEMA))
    return {
        "json": [(chat(SYSTEM, doc), schema) for doc in DOCUMENTS[:n]],
        "rag": [(chat("Answer from the text, quoting it exactly.",
                      f"Text: {PASSAGE}\n\nQuestion: {q}"), None) for q in RAG_QUESTIONS[:n]],
        "chat": [(chat(None, p), None) for p in CHAT_PROMPTS[:n]],
    }


def run_one(s: Scheduler, rid: str, ids: list[int], grammar: GrammarReq | None,
            new_tokens: int) -> dict[str, Any]:
    """One request alone on ``s``: its output and decode timing."""
    s.add_request(GenerateReq(rid=rid, input_ids=ids, grammar=grammar, stream=True,
                              sampling=SamplingParams(temperature=0.0,
                                                      max_new_tokens=new_tokens)))
    out: list[int] = []
    first = end = 0.0
    while s.has_work():
        for req in s.waiting:
            if req.grammar_future is not None:
                req.grammar_future.result()
        for o in s.step():
            if o.rollback:
                del out[len(out) - o.rollback:]
            out.extend(o.new_ids)
            if out and not first:
                first = time.perf_counter()
        end = time.perf_counter()
    return {"ids": out, "decode_tokens": max(len(out) - 1, 0), "decode_s": end - first}


def spec_delta(before: dict[str, Any], after: dict[str, Any]) -> dict[str, float]:
    d = {k: after[k] - before[k] for k in after if k.startswith("spec_")
         and isinstance(after[k], int)}
    d["accept_length_mean"] = (d["spec_emitted_tokens"] / d["spec_verify_steps"]
                               if d["spec_verify_steps"] else 0.0)
    for src in ("grammar", "prompt_lookup"):
        drafted = d[f"spec_draft_tokens_{src}"]
        d[f"accept_rate_{src}"] = d[f"spec_accepted_tokens_{src}"] / drafted if drafted else 0.0
    return d


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_common_args(parser, "speculative")
    parser.add_argument("--requests", type=int, default=3, help="requests per task")
    parser.add_argument("--new-tokens", type=int, default=96)
    parser.add_argument("--num-draft-tokens", type=int, default=6)
    parser.add_argument("--quantization", default=None, help="e.g. gguf (Q4_1 bits kept)")
    parser.add_argument("--tasks", default="json,rag,chat")
    args = parser.parse_args()
    setup_threads(args.threads)
    model = resolve_model(args.model)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model.hf_path)
    pool = 8192
    runner = ModelRunner(model.path, RunnerConfig(max_total_tokens=pool,
                                                  num_threads=args.threads,
                                                  quantization=args.quantization))
    common = {"model_path": str(model.path), "max_total_tokens": pool,
              "num_threads": args.threads, "quantization": args.quantization}
    plain = Scheduler(ServerArgs(**common), runner, tokenizer)
    spec = Scheduler(ServerArgs(**common, speculative_algorithm="NGRAM",
                                speculative_num_draft_tokens=args.num_draft_tokens),
                     runner, tokenizer)
    results: dict[str, Any] = {}
    reqs = task_requests(tokenizer, args.requests)
    for task in args.tasks.split(","):
        rows = {"off": [], "on": []}
        before = spec.info()
        for i, (ids, grammar) in enumerate(reqs[task]):
            rows["off"].append(run_one(plain, f"{task}{i}-off", ids, grammar, args.new_tokens))
            rows["on"].append(run_one(spec, f"{task}{i}-on", ids, grammar, args.new_tokens))
        rate = {k: sum(r["decode_tokens"] for r in v) / sum(r["decode_s"] for r in v)
                for k, v in rows.items()}
        same = sum(a["ids"] == b["ids"] for a, b in zip(rows["off"], rows["on"]))
        stats = spec_delta(before, spec.info())
        results[task] = {"decode_tok_s_off": rate["off"], "decode_tok_s_on": rate["on"],
                         "ratio": rate["on"] / rate["off"], "identical_outputs": same,
                         "requests": len(rows["on"]), **stats,
                         "sample_text_on": tokenizer.decode(rows["on"][0]["ids"])[:200]}
        r = results[task]
        print(f"{task:5s} off {r['decode_tok_s_off']:6.1f} tok/s  on {r['decode_tok_s_on']:6.1f}"
              f" tok/s  ratio {r['ratio']:.2f}  accept length {r['accept_length_mean']:.2f}  "
              f"grammar {r['accept_rate_grammar']:.2f} lookup {r['accept_rate_prompt_lookup']:.2f}"
              f"  identical {same}/{len(rows['on'])}", flush=True)
    write_results(args.out, {"args": vars(args), "model": model.describe(), "results": results})


if __name__ == "__main__":
    main()
