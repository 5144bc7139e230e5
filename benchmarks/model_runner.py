"""Model-runner throughput vs Hugging Face transformers on the same weights, in one run.

Prefill tokens/s (a batch of prompts, last-token logits) and batched greedy decode tokens/s
(batch 1, 8, 32) for the built-in tiny Llama and the ~20M ``small`` Llama. Both sides run with
the same torch thread count; each figure is the median of ``--repeats`` runs.

    .venv/bin/python benchmarks/model_runner.py [--repeats 3] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from radixlm import env
from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing import greedy_generate
from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


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


def bench_model(path: Path, args: argparse.Namespace) -> list[dict]:
    runner = ModelRunner(path, RunnerConfig(page_size=args.page_size, max_total_tokens=65536,
                                            num_threads=args.threads))
    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    hf.generation_config.eos_token_id = None  # decode exactly --new-tokens on both sides
    vocab = runner.vocab_size
    rows = []
    prompts = prompts_for(8, args.prefill_len, vocab, 0)
    ours_prefill(runner, prompts)  # warm-up
    t_ours = median_time(lambda: ours_prefill(runner, prompts), args.repeats)
    t_hf = median_time(lambda: hf_prefill(hf, prompts), args.repeats)
    n = 8 * args.prefill_len
    rows.append(dict(phase=f"prefill 8x{args.prefill_len}", radixlm=n / t_ours, hf=n / t_hf))
    for batch in (1, 8, 32):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--page-size", type=int, default=16)
    parser.add_argument("--prefill-len", type=int, default=256)
    parser.add_argument("--prompt-len", type=int, default=32)
    parser.add_argument("--new-tokens", type=int, default=64)
    parser.add_argument("--sizes", default="tiny,small")
    parser.add_argument("--out", default="benchmarks/results/model_runner.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = {}
    for size in args.sizes.split(","):
        path = ensure_tiny_model(TinyModelSpec(arch="llama", size=size),
                                 env.cache_dir() / "models")
        params = json.loads((path / "radixlm_tiny.json").read_text())["parameters"]
        results[size] = bench_model(path, args)
        print(f"\n### llama-{size} ({params / 1e6:.1f}M params, {args.threads} thread)")
        print("| phase | radixlm tok/s | transformers tok/s | ratio | greedy identical |")
        print("|---|---|---|---|---|")
        for r in results[size]:
            print(f"| {r['phase']} | {r['radixlm']:.0f} | {r['hf']:.0f} | "
                  f"{r['radixlm'] / r['hf']:.2f}x | {r.get('identical', '-')} |")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"args": vars(args), "results": results}, indent=2))


if __name__ == "__main__":
    main()
