"""Model-runner throughput vs Hugging Face transformers on the same weights, in one run.

Prefill tokens/s (8 prompts of ``--prefill-len`` tokens, last-token logits) and batched greedy
decode tokens/s (batch 1, 8, 32) for each model of ``--model`` (comma-separated; default
SmolLM2-135M-Instruct, see ``bench_common.py``). Both sides run with the same torch thread count;
each figure is the median of ``--repeats`` runs, and greedy outputs are compared token for token.

    python benchmarks/model_runner.py [--model smollm2,small] [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse

import torch
from bench_common import (
    BenchModel,
    add_common_args,
    load_hf_model,
    median_time,
    resolve_model,
    setup_threads,
    write_results,
)

from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate

DECODE_BATCHES = (1, 8, 32)
PREFILL_BATCH = 8


def prompts_for(batch: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(5, vocab, (batch, length), generator=gen).tolist()


def ours_prefill(runner: ModelRunner, prompts: list[list[int]]) -> None:
    specs = []
    for ids in prompts:
        slots, _ = runner.allocator.extend_slots([], len(ids), True)
        specs.append(SeqSpec(ids, slots))
    runner.forward(specs)
    for s in specs:
        runner.allocator.free(pages_of(s.kv_slots, runner.allocator.page_size))


def hf_prefill(model: torch.nn.Module, prompts: list[list[int]]) -> None:
    with torch.inference_mode():
        model(torch.tensor(prompts), logits_to_keep=1)


def hf_generate(model: torch.nn.Module, prompts: list[list[int]], new: int) -> list[list[int]]:
    ids = torch.tensor(prompts)
    with torch.inference_mode():
        out = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new,
                             min_new_tokens=new, do_sample=False)
    return out[:, ids.shape[1]:].tolist()


def pool_tokens(args: argparse.Namespace) -> int:
    """KV pool just big enough for the largest phase (plus a page per sequence of slack)."""
    need = max(PREFILL_BATCH * args.prefill_len,
               max(DECODE_BATCHES) * (args.prompt_len + args.new_tokens))
    return need + max(DECODE_BATCHES) * args.page_size


def bench_model(model: BenchModel, args: argparse.Namespace) -> list[dict]:
    runner = ModelRunner(model.path, RunnerConfig(page_size=args.page_size,
                                                  max_total_tokens=pool_tokens(args),
                                                  num_threads=args.threads))
    hf = load_hf_model(model)
    vocab = runner.vocab_size
    rows = []
    prompts = prompts_for(PREFILL_BATCH, args.prefill_len, vocab, 0)
    ours_prefill(runner, prompts)  # warm-up
    t_ours = median_time(lambda: ours_prefill(runner, prompts), args.repeats)
    t_hf = median_time(lambda: hf_prefill(hf, prompts), args.repeats)
    n = PREFILL_BATCH * args.prefill_len
    rows.append(dict(phase=f"prefill {PREFILL_BATCH}x{args.prefill_len}", radixlm=n / t_ours,
                     hf=n / t_hf))
    for batch in DECODE_BATCHES:
        prompts = prompts_for(batch, args.prompt_len, vocab, batch)
        ours_out = greedy_generate(runner, prompts, args.new_tokens)
        hf_out = hf_generate(hf, prompts, args.new_tokens)
        same = sum(a == b for a, b in zip(ours_out, hf_out))
        t_ours = median_time(lambda p=prompts: greedy_generate(runner, p, args.new_tokens),
                             args.repeats)
        t_hf = median_time(lambda p=prompts: hf_generate(hf, p, args.new_tokens), args.repeats)
        n = batch * args.new_tokens
        rows.append(dict(phase=f"decode batch {batch}", radixlm=n / t_ours, hf=n / t_hf,
                         identical=f"{same}/{batch}"))
    return rows


def print_table(title: str, rows: list[dict]) -> None:
    print(f"\n### {title}")
    print("| phase | radixlm tok/s | transformers tok/s | ratio | greedy identical |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['phase']} | {r['radixlm']:.0f} | {r['hf']:.0f} | "
              f"{r['radixlm'] / r['hf']:.2f}x | {r.get('identical', '-')} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_common_args(parser, "model_runner",
                    model_help="comma-separated: smollm2 (default), tiny, small or paths")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--prefill-len", type=int, default=512)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    args = parser.parse_args()
    setup_threads(args.threads)
    results = {}
    for choice in args.model.split(","):
        model = resolve_model(choice)
        results[choice] = bench_model(model, args)
        print_table(f"{model.describe()}, {args.threads} thread(s), page {args.page_size}",
                    results[choice])
    write_results(args.out, {"args": vars(args), "results": results})


if __name__ == "__main__":
    main()
