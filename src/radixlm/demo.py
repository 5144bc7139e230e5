"""The demo (the README's main job): text from the built-in tiny model through the runtime."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from . import env

DEMO_PROMPTS = [
    "Document: Heidi is 6 years old and works as a teacher in Paris.\nJSON:",
    "Question: What is the capital of Japan?\nAnswer:",
    "The weather in Oslo was",
]


def demo_model_path(args: argparse.Namespace) -> Path:
    """The model the demo runs: ``--model-path`` or the cached built-in tiny model."""
    if args.model_path:
        return Path(args.model_path)
    from .tiny_model import TinyModelSpec, ensure_tiny_model

    spec = TinyModelSpec(arch=args.arch, size=args.size, train_seconds=args.train_seconds,
                         seed=args.seed)
    print(f"building/reusing the built-in tiny model ({spec.cache_name()}) ...", flush=True)
    return ensure_tiny_model(spec, env.cache_dir() / "models")


def run_demo(args: argparse.Namespace) -> int:
    import torch
    from transformers import AutoTokenizer

    from .runtime.batch_generate import greedy_generate
    from .runtime.model_runner import ModelRunner, RunnerConfig

    torch.set_num_threads(env.num_threads_default())
    path = demo_model_path(args)
    runner = ModelRunner(path, RunnerConfig(num_threads=env.num_threads_default()))
    tok = AutoTokenizer.from_pretrained(path)
    prompts = [tok(p).input_ids for p in DEMO_PROMPTS]
    start = time.perf_counter()
    outputs = greedy_generate(runner, prompts, 40, runner.model_config.eos_token_ids)
    elapsed = time.perf_counter() - start
    for text, out in zip(DEMO_PROMPTS, outputs):
        print(f"--- {text!r}\n{tok.decode(out, skip_special_tokens=True)!r}")
    n = sum(map(len, outputs))
    print(f"{n} tokens in {elapsed:.2f} s ({n / elapsed:.0f} tok/s)")
    return 0
