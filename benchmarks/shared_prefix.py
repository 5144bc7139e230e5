"""The RAG case: many questions over one long document.

``--requests`` requests = one ``--doc-tokens`` document + a distinct ``--question-tokens``
question each, ``--new-tokens`` greedy output tokens each (EOS ignored), on ``--model``
(default SmolLM2-135M-Instruct, see ``bench_common.py``). Four ways, in one run, same weights, same
torch thread count, every radixlm run on a cold cache:
  1. radixlm (radix cache on, page sizes 1 and 16), all requests submitted at once;
  2. radixlm with --disable-radix-cache;
  3. transformers ``generate`` in batches of ``--hf-batch`` (``--hf-plain-batches K`` times
     only the first K batches and extrapolates linearly: every batch has the same shape);
  4. transformers with the document's KV computed once and copied into each batch's cache
     (the reuse a user can hand-make).
Reports wall time, throughput ratios, cache hit rate vs the ideal, and KV waste. Outputs are
compared token for token with 4.

    python benchmarks/shared_prefix.py [--model smollm2] [--requests 32] [--doc-tokens 1552]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
from bench_common import (
    BenchModel,
    WasteSampler,
    add_common_args,
    load_hf_model,
    load_tokenizer,
    resolve_model,
    setup_threads,
    write_results,
)

from radixlm.runtime.api.engine import Engine
from radixlm.tiny_model.corpus import generate_corpus


def workload(tokenizer, n_req: int, doc_tokens: int, q_tokens: int) -> tuple[list, list]:
    """Token ids of the document and of each question (fixed lengths: no padding needed)."""
    text = " ".join(d for d in generate_corpus(4000, seed=123) if not d.startswith("{"))
    ids = tokenizer(text, add_special_tokens=False).input_ids
    bos = [] if tokenizer.bos_token_id is None else [tokenizer.bos_token_id]
    doc = bos + ids[: doc_tokens - len(bos)]
    questions = [ids[doc_tokens + i * q_tokens: doc_tokens + (i + 1) * q_tokens]
                 for i in range(n_req)]
    if len(questions[-1]) < q_tokens:
        raise SystemExit("the corpus text is too short for this many questions")
    return doc, questions


def run_radixlm(model: BenchModel, prompts: list[list[int]], new: int, **server_args) -> dict:
    with Engine(model_path=str(model.path), **server_args) as engine:
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


def hf_plain(model, prompts: list[list[int]], new: int, batch: int, max_batches: int
             ) -> dict:
    """Batched ``generate``; with ``max_batches`` > 0 only that many batches run and the
    time is scaled to all of them (the batches are identical in shape)."""
    starts = list(range(0, len(prompts), batch))
    ran = starts[:max_batches] if max_batches > 0 else starts
    outs, start = [], time.perf_counter()
    for i in ran:
        ids = torch.tensor(prompts[i: i + batch])
        with torch.inference_mode():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=new, min_new_tokens=new)
        outs.extend(out[:, ids.shape[1]:].tolist())
    measured = time.perf_counter() - start
    note = "" if len(ran) == len(starts) else \
        f" (extrapolated from {len(ran)}/{len(starts)} batches)"
    return {"seconds": measured * len(starts) / len(ran), "measured_seconds": measured,
            "note": note, "outputs": outs}


def hf_reuse(model, doc: list[int], questions: list[list[int]], new: int, batch: int) -> dict:
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
    return {"seconds": time.perf_counter() - start, "outputs": outs}


def print_table(rows: dict, args: argparse.Namespace, title: str) -> None:
    print(f"\n{title}\n")
    print("| system | seconds | output tok/s | vs transformers generate | vs hand-made reuse "
          "| cache hit rate | KV waste | greedy = hand-made reuse |")
    print("|---|---|---|---|---|---|---|---|")
    ref = rows["transformers, hand-made doc KV reuse"]
    base = rows.get("transformers generate", ref)
    for name, r in rows.items():
        same = sum(a == b for a, b in zip(r["outputs"], ref["outputs"]))
        print(f"| {name}{r.get('note', '')} | {r['seconds']:.2f} | "
              f"{args.requests * args.new_tokens / r['seconds']:.0f} | "
              f"{base['seconds'] / r['seconds']:.2f}x | {ref['seconds'] / r['seconds']:.2f}x | "
              f"{r.get('hit_rate', float('nan')):.1%} | {r.get('kv_waste', float('nan')):.2%} | "
              f"{same}/{len(r['outputs'])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, "shared_prefix")
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--doc-tokens", type=int, default=1552)
    parser.add_argument("--question-tokens", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--hf-batch", type=int, default=16)
    parser.add_argument("--hf-plain-batches", type=int, default=0,
                        help="run only this many transformers generate batches and "
                             "extrapolate (0 = all)")
    parser.add_argument("--skip-hf-plain", action="store_true")
    parser.add_argument("--skip-no-cache", action="store_true",
                        help="leave out radixlm with the radix cache disabled")
    args = parser.parse_args()
    setup_threads(args.threads)
    model = resolve_model(args.model)
    doc, questions = workload(load_tokenizer(model), args.requests, args.doc_tokens,
                              args.question_tokens)
    prompts = [doc + q for q in questions]
    total_prompt = sum(map(len, prompts))
    ideal = (total_prompt - len(doc) - sum(map(len, questions))) / total_prompt
    common = dict(num_threads=args.threads, chunked_prefill_size=2048,
                  max_total_tokens=args.requests * (len(prompts[0]) + args.new_tokens) + 4096)
    rows = {}
    rows["radixlm page 1"] = run_radixlm(model, prompts, args.new_tokens, page_size=1, **common)
    rows["radixlm page 16"] = run_radixlm(model, prompts, args.new_tokens, page_size=16,
                                          **common)
    if not args.skip_no_cache:
        rows["radixlm, cache disabled"] = run_radixlm(model, prompts, args.new_tokens,
                                                      disable_radix_cache=True, **common)
    hf = load_hf_model(model)
    rows["transformers, hand-made doc KV reuse"] = hf_reuse(hf, doc, questions,
                                                            args.new_tokens, args.hf_batch)
    if not args.skip_hf_plain:
        rows["transformers generate"] = hf_plain(hf, prompts, args.new_tokens, args.hf_batch,
                                                 args.hf_plain_batches)
    print_table(rows, args, f"{args.requests} requests x ({len(doc)}-token document + "
                f"{args.question_tokens}-token question), {args.new_tokens} output tokens, "
                f"{model.describe()}, {args.threads} thread(s); ideal hit rate {ideal:.1%}")
    write_results(args.out, {"args": vars(args), "model": model.label, "ideal_hit_rate": ideal,
                             "rows": {k: {kk: vv for kk, vv in v.items() if kk != "outputs"}
                                      for k, v in rows.items()}})


if __name__ == "__main__":
    main()
