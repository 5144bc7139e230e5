"""The RAG case: many questions over one long document.

64 requests = one ~1,500-token document + a distinct ~40-token question each, 32 greedy output
tokens each (EOS ignored), on the ~20M built-in Llama. Four ways, in one run, same weights, same
torch thread count:
  1. radixlm (radix cache on), all requests submitted at once;
  2. radixlm with --disable-radix-cache;
  3. transformers ``generate`` in batches of 16;
  4. transformers with the document's KV computed once and copied into each batch's cache
     (the reuse a user can hand-make).
Reports wall time, throughput ratios, cache hit rate vs the ideal, and KV waste at page sizes 1
and 16. Outputs of 1, 3 and 4 are compared token for token.

    .venv/bin/python benchmarks/shared_prefix.py [--requests 64] [--doc-tokens 1500]
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import threading
import time
from pathlib import Path

import torch

from radixlm import env
from radixlm.runtime.api.engine import Engine
from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model
from radixlm.tiny_model.corpus import generate_corpus


def workload(tokenizer, n_req: int, doc_tokens: int, q_tokens: int) -> tuple[list, list]:
    """Token ids of the document and of each question (fixed lengths: no padding needed)."""
    text = " ".join(d for d in generate_corpus(4000, seed=123) if not d.startswith("{"))
    ids = tokenizer(text, add_special_tokens=False).input_ids
    doc = [tokenizer.bos_token_id] + ids[: doc_tokens - 1]
    questions = [ids[doc_tokens + i * q_tokens: doc_tokens + (i + 1) * q_tokens]
                 for i in range(n_req)]
    return doc, questions


class WasteSampler:
    """Polls the engine's KV stats while requests run; mean KV waste over busy samples."""

    def __init__(self, engine: Engine) -> None:
        self.engine, self.samples, self._stop = engine, [], threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.05):
            info = self.engine.get_server_info()
            if info["running"]:
                self.samples.append(info["kv_waste"])

    def __enter__(self) -> WasteSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float("nan")


def run_radixlm(path: Path, prompts: list[list[int]], new: int, **server_args) -> dict:
    with Engine(model_path=str(path), **server_args) as engine:
        params = {"temperature": 0.0, "max_new_tokens": new, "ignore_eos": True}
        engine.generate(input_ids=[5, 6, 7], sampling_params={"max_new_tokens": 1})  # warm-up
        engine.flush_cache()
        with WasteSampler(engine) as waste:
            start = time.perf_counter()
            outs = engine.generate(input_ids=prompts, sampling_params=params)
            elapsed = time.perf_counter() - start
        info = engine.get_server_info()
    prompt_tokens = sum(o["meta_info"]["prompt_tokens"] for o in outs)
    cached = sum(o["meta_info"]["cached_tokens"] for o in outs)
    return {"seconds": elapsed, "outputs": [o["output_ids"] for o in outs],
            "hit_rate": cached / prompt_tokens, "kv_waste": waste.mean,
            "retracted": info["retracted"]}


def hf_plain(model, prompts: list[list[int]], new: int, batch: int) -> tuple[float, list]:
    outs, start = [], time.perf_counter()
    for i in range(0, len(prompts), batch):
        ids = torch.tensor(prompts[i: i + batch])
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=new, min_new_tokens=new)
        outs.extend(out[:, ids.shape[1]:].tolist())
    return time.perf_counter() - start, outs


def hf_reuse(model, doc: list[int], questions: list[list[int]], new: int, batch: int
             ) -> tuple[float, list]:
    from transformers import DynamicCache

    outs, start = [], time.perf_counter()
    with torch.inference_mode():
        cache = DynamicCache(config=model.config)
        model(torch.tensor([doc]), past_key_values=cache, use_cache=True)
        for i in range(0, len(questions), batch):
            qs = questions[i: i + batch]
            batch_cache = copy.deepcopy(cache)
            batch_cache.batch_repeat_interleave(len(qs))
            ids = torch.tensor([doc + q for q in qs])
            out = model.generate(ids, attention_mask=torch.ones_like(ids),
                                 past_key_values=batch_cache, do_sample=False,
                                 max_new_tokens=new, min_new_tokens=new)
            outs.extend(out[:, ids.shape[1]:].tolist())
    return time.perf_counter() - start, outs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--doc-tokens", type=int, default=1500)
    parser.add_argument("--question-tokens", type=int, default=40)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--hf-batch", type=int, default=16)
    parser.add_argument("--size", default="small")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--skip-hf-plain", action="store_true")
    parser.add_argument("--out", default="benchmarks/results/shared_prefix.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = ensure_tiny_model(TinyModelSpec(arch="llama", size=args.size),
                             env.cache_dir() / "models")
    tok = AutoTokenizer.from_pretrained(path)
    doc, questions = workload(tok, args.requests, args.doc_tokens, args.question_tokens)
    prompts = [doc + q for q in questions]
    total_prompt = sum(map(len, prompts))
    ideal = (total_prompt - len(doc) - sum(map(len, questions))) / total_prompt
    common = dict(num_threads=args.threads, chunked_prefill_size=2048,
                  max_total_tokens=args.requests * (len(prompts[0]) + args.new_tokens) + 4096)
    rows = {}
    rows["radixlm page 1"] = run_radixlm(path, prompts, args.new_tokens, page_size=1, **common)
    rows["radixlm page 16"] = run_radixlm(path, prompts, args.new_tokens, page_size=16, **common)
    rows["radixlm, cache disabled"] = run_radixlm(path, prompts, args.new_tokens,
                                                  disable_radix_cache=True, **common)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    model.generation_config.eos_token_id = None
    t, outs = hf_reuse(model, doc, questions, args.new_tokens, args.hf_batch)
    rows["transformers, hand-made doc KV reuse"] = {"seconds": t, "outputs": outs}
    if not args.skip_hf_plain:
        t, outs = hf_plain(model, prompts, args.new_tokens, args.hf_batch)
        rows["transformers generate"] = {"seconds": t, "outputs": outs}
    ref = rows["transformers, hand-made doc KV reuse"]["outputs"]
    base = rows.get("transformers generate", rows["transformers, hand-made doc KV reuse"])
    print(f"\n{args.requests} requests x ({len(doc)}-token document + {args.question_tokens}"
          f"-token question), {args.new_tokens} output tokens, llama-{args.size}, "
          f"{args.threads} thread(s); ideal hit rate {ideal:.1%}\n")
    print("| system | seconds | output tok/s | vs transformers generate | vs hand-made reuse "
          "| cache hit rate | KV waste | greedy = hand-made reuse |")
    print("|---|---|---|---|---|---|---|---|")
    hand = rows["transformers, hand-made doc KV reuse"]["seconds"]
    for name, r in rows.items():
        same = sum(a == b for a, b in zip(r["outputs"], ref))
        print(f"| {name} | {r['seconds']:.2f} | "
              f"{args.requests * args.new_tokens / r['seconds']:.0f} | "
              f"{base['seconds'] / r['seconds']:.2f}x | {hand / r['seconds']:.2f}x | "
              f"{r.get('hit_rate', float('nan')):.1%} | {r.get('kv_waste', float('nan')):.2%} | "
              f"{same}/{len(ref)} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "ideal_hit_rate": ideal,
                               "rows": {k: {kk: vv for kk, vv in v.items() if kk != "outputs"}
                                        for k, v in rows.items()}}, indent=2))


if __name__ == "__main__":
    main()
