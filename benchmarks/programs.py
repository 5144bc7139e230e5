"""Program workloads from the SGLang paper, as programs of the language, on three systems.

Workloads (all greedy; generation lengths fixed with ignore_eos so every system does the same
work): few-shot multiple choice (5-shot prefix, ``select`` over A-D), tree of thought (``fork``
3 plans x 3 executions), multi-turn chat (roles, 4 turns), JSON extraction (3-shot prefix, one
gen per document, unconstrained so that the transformers loop does the same work). Systems:
radixlm (Engine backend, ``run_batch``), the same engine with the radix cache disabled, and a
naive loop of ``transformers`` ``generate`` / forward calls behind the same programs (one at a
time). The same torch thread count on every side (``--threads``, default 1); ``--model``
defaults to SmolLM2-135M-Instruct (see ``bench_common.py``). Reports programs/s, the throughput
ratios, the cache hit rate (prompt tokens served from the cache) and how many programs
produced exactly the naive loop's outputs.

    python benchmarks/programs.py [--model smollm2] [--scale 1.0]
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from bench_common import (
    BenchModel,
    add_common_args,
    load_hf_model,
    load_tokenizer,
    resolve_model,
    setup_threads,
    write_results,
)

import radixlm as sgl
from radixlm.lang.backend.base import BaseBackend
from radixlm.lang.backend.select_scoring import choice_start
from radixlm.lang.chat_template import resolve_chat_template
from radixlm.lang.choices import mean_logprob
from radixlm.runtime.api.engine import Engine
from radixlm.tiny_model.corpus import CITIES, JOBS, NAMES, generate_corpus

# -- workloads -----------------------------------------------------------------------------

LETTERS = ("A", "B", "C", "D")


def _mc_question(rng: random.Random) -> tuple[str, str]:
    country_of = {v: k for k, v in CITIES.items()}
    country = rng.choice(sorted(country_of))
    options = rng.sample([c for c in CITIES if c != country_of[country]], 3)
    answer = rng.randrange(4)
    options.insert(answer, country_of[country])
    lines = "".join(f"{letter}. {o}\n" for letter, o in zip(LETTERS, options))
    return f"Question: What is the capital of {country}?\n{lines}", LETTERS[answer]


_rng = random.Random(0)
FIVE_SHOT = "The following are multiple choice questions about geography.\n\n" + "".join(
    q + f"Answer: {a}\n\n" for q, a in (_mc_question(_rng) for _ in range(5)))


@sgl.function
def multiple_choice(s, question):
    s += FIVE_SHOT
    s += question + "Answer:" + sgl.select("answer", [" A", " B", " C", " D"])


TOT_INSTRUCTION = ("Solve the problem step by step. First write a plan, then carry it out, "
                   "then check the result.\n")


@sgl.function
def tree_of_thought(s, question, tokens):
    s += TOT_INSTRUCTION + "Question: " + question + "\n"
    plans = s.fork(3)
    plans += lambda i: f"Plan {i + 1}:" + sgl.gen("plan", max_tokens=tokens) + "\n"
    executions = [plan.fork(3) for plan in plans]
    for steps in executions:
        steps += "Execution:" + sgl.gen("execution", max_tokens=tokens)
    for steps in executions:
        steps.join()
    plans.join()


@sgl.function
def chat(s, messages, tokens):
    s += sgl.system("You are a helpful assistant who answers briefly.")
    for i, message in enumerate(messages):
        s += sgl.user(message)
        s += sgl.assistant(sgl.gen(f"reply_{i}", max_tokens=tokens))


def _document(rng: random.Random) -> tuple[str, str]:
    name, city, job, age = rng.choice(NAMES), rng.choice(list(CITIES)), rng.choice(JOBS), \
        rng.randint(18, 80)
    doc = f"{name} is {age} years old and works as a {job} in {city}."
    return doc, json.dumps({"name": name, "age": age, "city": city, "job": job})


JSON_FEW_SHOT = "Extract the person in each document as JSON.\n" + "".join(
    f"Document: {d}\nJSON: {j}\n" for d, j in (_document(random.Random(i)) for i in range(3)))


@sgl.function
def json_extraction(s, document, tokens):
    s += JSON_FEW_SHOT
    s += "Document: " + document + "\nJSON:" + sgl.gen("json", max_tokens=tokens)


def _sentences() -> list[str]:
    return [d for d in generate_corpus(3000, seed=11) if not d.startswith(("{", "<", "Doc",
                                                                           "Quest"))]


@dataclass
class Workload:
    name: str
    program: Any
    args: list[dict[str, Any]]
    output_vars: list[str]


def workloads(scale: float) -> list[Workload]:
    rng = random.Random(1)
    n = lambda k: max(1, round(k * scale))  # noqa: E731 - local sizing helper
    sentences = _sentences()
    msgs = [[" ".join(rng.sample(sentences, 3)) for _ in range(4)] for _ in range(n(8))]
    return [
        Workload("few-shot multiple choice (5-shot, select)", multiple_choice,
                 [{"question": _mc_question(rng)[0]} for _ in range(n(48))], ["answer"]),
        Workload("tree of thought (fork 3x3)", tree_of_thought,
                 [{"question": rng.choice(sentences), "tokens": 16} for _ in range(n(4))],
                 ["plan"]),
        Workload("multi-turn chat (4 turns)", chat,
                 [{"messages": m, "tokens": 24} for m in msgs],
                 [f"reply_{i}" for i in range(4)]),
        Workload("JSON extraction (3-shot)", json_extraction,
                 [{"document": _document(rng)[0], "tokens": 32} for _ in range(n(24))],
                 ["json"]),
    ]


# -- the naive system: transformers calls behind the same programs -------------------------

class TransformersBackend(BaseBackend):
    """Each gen is one ``generate`` call on the full text, each select one forward pass per
    choice; nothing is cached across calls and calls run one at a time."""

    def __init__(self, model: BenchModel) -> None:
        super().__init__()
        self.tok = load_tokenizer(model)
        self.model = load_hf_model(model)  # EOS off: ignore_eos below decides per call
        self.eos_token_id = self.tok.eos_token_id
        self.chat_template = resolve_chat_template(str(model.hf_path), self.tok)
        self.lock = threading.Lock()

    def generate(self, s: Any, sampling_params: Any) -> tuple[str, dict[str, Any]]:
        p = sampling_params
        if p.temperature not in (0, 0.0) or p.stop_list() and not p.ignore_eos:
            raise ValueError("the naive backend runs greedy, fixed-length gens only")
        ids = self.tok(s.text_).input_ids
        with self.lock, torch.no_grad():
            out = self.model.generate(
                torch.tensor([ids]), attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                max_new_tokens=p.max_new_tokens, do_sample=False,
                eos_token_id=None if p.ignore_eos else self.eos_token_id,
                pad_token_id=self.tok.pad_token_id)
        new = out[0, len(ids):].tolist()
        meta = {"prompt_tokens": len(ids), "cached_tokens": 0, "completion_tokens": len(new)}
        s.record_usage("gen", meta)
        return self.tok.decode(new, skip_special_tokens=True), meta

    def select(self, s: Any, choices: list[str], temperature: float, choices_method: Any
               ) -> Any:
        prefix_ids = self.tok(s.text_).input_ids
        entries = []
        for c in choices:
            ids = self.tok(s.text_ + c).input_ids
            start = choice_start(prefix_ids, ids)
            with self.lock, torch.no_grad():
                lp = torch.log_softmax(self.model(torch.tensor([ids])).logits[0].float(), -1)
            entries.append([[lp[j - 1, ids[j]].item(), ids[j], None]
                            for j in range(max(start, 1), len(ids))])
            s.record_usage("select", {"prompt_tokens": len(ids), "cached_tokens": 0})
        return choices_method(choices=choices,
                              normalized_prompt_logprobs=[mean_logprob(e) for e in entries],
                              input_token_logprobs=entries,
                              output_token_logprobs=[[] for _ in choices])


# -- running -------------------------------------------------------------------------------

def _outputs(states: list[Any], names: list[str]) -> list[Any]:
    return [None if st.error() else [st[n] for n in names] for st in states]


def _run(workload: Workload, backend: Any, threads: int | str,
         counters: Callable[[], tuple[int, int]] | None) -> dict[str, Any]:
    before = counters() if counters else (0, 0)
    start = time.perf_counter()
    states = workload.program.run_batch(workload.args, backend=backend, temperature=0,
                                        ignore_eos=True, num_threads=threads)
    seconds = time.perf_counter() - start
    after = counters() if counters else (0, 0)
    errors = [repr(st.error()) for st in states if st.error() is not None]
    if errors:
        raise RuntimeError(f"{workload.name}: {len(errors)} programs failed: {errors[0]}")
    generated = sum(st.cache_stats()["completion_tokens"] for st in states)
    prompt = after[0] - before[0]
    return {"seconds": seconds, "programs_per_s": len(states) / seconds,
            "generated_tokens": generated, "prompt_tokens": prompt,
            "hit_rate": (after[1] - before[1]) / prompt if prompt else 0.0,
            "outputs": _outputs(states, workload.output_vars)}


def _engine_system(model: BenchModel, loads: list[Workload], **server_args: Any) -> list[dict]:
    with Engine(model_path=str(model.path), **server_args) as engine:
        def counters() -> tuple[int, int]:
            info = engine.get_server_info()
            return info["prompt_tokens"], info["cached_tokens"]

        loads[0].program.run_batch(loads[0].args[:2], backend=engine, temperature=0)  # warm-up
        results = []
        for w in loads:
            engine.flush_cache()
            results.append(_run(w, engine, "auto", counters))
        return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, "programs")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies program counts")
    parser.add_argument("--max-total-tokens", type=int, default=32768, help="KV pool")
    args = parser.parse_args()
    setup_threads(args.threads)
    model = resolve_model(args.model)
    loads = workloads(args.scale)
    common = dict(num_threads=args.threads, max_total_tokens=args.max_total_tokens)
    systems = {"radixlm": _engine_system(model, loads, **common),
               "no radix cache": _engine_system(model, loads, disable_radix_cache=True,
                                                **common)}
    naive = TransformersBackend(model)
    loads[0].program.run_batch(loads[0].args[:1], backend=naive, temperature=0)  # warm-up
    systems["transformers loop"] = [_run(w, naive, 1, None) for w in loads]

    print(f"\n{model.describe()}, {args.threads} torch thread(s) per process, CPU\n")
    print("| workload | programs | radixlm prog/s | no-cache prog/s | transformers prog/s | "
          "vs no cache | vs transformers | hit rate | hit rate, no cache | same outputs |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for i, w in enumerate(loads):
        ours, off, hf = (systems[k][i] for k in systems)
        same = sum(a == b for a, b in zip(ours["outputs"], hf["outputs"]))
        rows.append({"workload": w.name, "programs": len(w.args), "radixlm": ours,
                     "no_cache": off, "transformers": hf, "same_outputs": same})
        print(f"| {w.name} | {len(w.args)} | {ours['programs_per_s']:.2f} | "
              f"{off['programs_per_s']:.2f} | {hf['programs_per_s']:.2f} | "
              f"{ours['programs_per_s'] / off['programs_per_s']:.1f}x | "
              f"{ours['programs_per_s'] / hf['programs_per_s']:.1f}x | "
              f"{ours['hit_rate']:.0%} | {off['hit_rate']:.0%} | {same}/{len(w.args)} |")
    write_results(args.out, {"args": vars(args), "model": model.label, "rows": rows})


if __name__ == "__main__":
    main()
