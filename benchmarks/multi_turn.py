"""Multi-turn chat: 16 conversations x 6 turns through the chat template.

Each turn appends a user message (~60 tokens) and a generated reply (24 tokens, EOS ignored) to
the history; all conversations of a turn are sent at once. Reports, per turn, the median time
to first token and the cache hit rate, with the radix cache on and off (same run), and the KV
waste (share of allocated slots holding no live token) at page sizes 1 and 16. ``--model``
defaults to SmolLM2-135M-Instruct (see ``bench_common.py``); the chat template is the model's.

    python benchmarks/multi_turn.py [--model smollm2] [--chats 16] [--turns 6]
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor

from bench_common import (
    BenchModel,
    WasteSampler,
    add_common_args,
    resolve_model,
    setup_threads,
    write_results,
)

from radixlm.runtime.api.engine import Engine
from radixlm.tiny_model.corpus import generate_corpus


def user_messages(chats: int, turns: int, words: int) -> list[list[str]]:
    sentences = [d for d in generate_corpus(5000, seed=7) if not d.startswith(("{", "<"))]
    out, k = [], 0
    for _ in range(chats):
        msgs = []
        for _ in range(turns):
            text = []
            while len(" ".join(text).split()) < words:
                text.append(sentences[k % len(sentences)])
                k += 1
            msgs.append(" ".join(text))
        out.append(msgs)
    return out


def run(model: BenchModel, msgs: list[list[str]], new: int, **server_args) -> dict:
    per_turn = []
    with Engine(model_path=str(model.path), **server_args) as engine:
        tok = engine.tokenizer
        histories: list[list[dict]] = [[] for _ in msgs]
        params = {"temperature": 0.0, "max_new_tokens": new, "ignore_eos": True}
        start = time.perf_counter()
        with WasteSampler(engine) as waste, ThreadPoolExecutor(len(msgs)) as pool:
            for turn in range(len(msgs[0])):
                prompts = []
                for h, m in zip(histories, msgs):
                    h.append({"role": "user", "content": m[turn]})
                    prompts.append(tok.apply_chat_template(h, tokenize=False,
                                                           add_generation_prompt=True))
                outs = list(pool.map(lambda p: engine.generate(p, params), prompts))
                for h, o in zip(histories, outs):
                    h.append({"role": "assistant", "content": o["text"]})
                metas = [o["meta_info"] for o in outs]
                per_turn.append({
                    "ttft_p50": statistics.median(m["ttft"] for m in metas),
                    "hit_rate": sum(m["cached_tokens"] for m in metas)
                    / sum(m["prompt_tokens"] for m in metas),
                    "prompt_tokens": statistics.fmean(m["prompt_tokens"] for m in metas),
                })
        elapsed = time.perf_counter() - start
    return {"seconds": elapsed, "turns": per_turn, "kv_waste": waste.mean}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, "multi_turn")
    parser.add_argument("--chats", type=int, default=16)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--user-words", type=int, default=45)
    parser.add_argument("--new-tokens", type=int, default=24)
    parser.add_argument("--max-total-tokens", type=int, default=32768,
                        help="KV pool per engine (the histories of every chat must fit)")
    args = parser.parse_args()
    setup_threads(args.threads)
    model = resolve_model(args.model)
    msgs = user_messages(args.chats, args.turns, args.user_words)
    common = dict(num_threads=args.threads, chunked_prefill_size=1024,
                  max_total_tokens=args.max_total_tokens)
    runs = {
        "cache, page 1": run(model, msgs, args.new_tokens, page_size=1, **common),
        "cache, page 16": run(model, msgs, args.new_tokens, page_size=16, **common),
        "no cache": run(model, msgs, args.new_tokens, disable_radix_cache=True, **common),
    }
    print(f"\n{args.chats} chats x {args.turns} turns, {model.describe()}, {args.threads} "
          f"thread(s), {args.new_tokens} output tokens per turn\n")
    print("| turn | mean prompt tokens | TTFT p50 cache (ms) | TTFT p50 no cache (ms) | "
          "TTFT ratio | hit rate (page 1) | hit rate (page 16) |")
    print("|---|---|---|---|---|---|---|")
    on, p16, off = runs["cache, page 1"], runs["cache, page 16"], runs["no cache"]
    for t in range(args.turns):
        a, b, c = on["turns"][t], off["turns"][t], p16["turns"][t]
        print(f"| {t + 1} | {a['prompt_tokens']:.0f} | {a['ttft_p50'] * 1e3:.0f} | "
              f"{b['ttft_p50'] * 1e3:.0f} | {b['ttft_p50'] / a['ttft_p50']:.1f}x | "
              f"{a['hit_rate']:.1%} | {c['hit_rate']:.1%} |")
    print("\n| run | total seconds | KV waste (mean while running) |\n|---|---|---|")
    for name, r in runs.items():
        print(f"| {name} | {r['seconds']:.1f} | {r['kv_waste']:.2%} |")
    write_results(args.out, {"args": vars(args), "model": model.label, "runs": runs})


if __name__ == "__main__":
    main()
