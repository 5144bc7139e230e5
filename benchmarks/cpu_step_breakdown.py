"""Where one decode step's time goes: the whole step, and the step with every linear (the
projections and the LM head) answered from a preallocated zero tensor, so the difference is
the GEMMs and the rest is what is not compute (norms, rotary, KV writes and gathers,
attention, Python per layer, batch metadata). Used by ``cpu_speed.py --breakdown``.

The requests decode at a fixed context of ``context`` tokens (their slots taken once, the
same step repeated), so only the step itself is timed; the best of ``repeats`` runs after a
warm-up (the machine is shared: interruptions only ever add time).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
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


def _best_ms(step, repeats: int) -> float:  # noqa: ANN001 - a zero-argument callable
    step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return 1000 * best


def step_breakdown(runner: ModelRunner, batch: int, context: int = 16,
                   repeats: int = 7) -> dict[str, float]:
    """``{"step_ms", "non_gemm_ms", "gemm_ms"}`` of a decode step of ``batch`` requests."""
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
        full = _best_ms(step, repeats)
        with linears_stubbed():
            rest = _best_ms(step, repeats)
    finally:
        for s in slots:
            runner.allocator.free(pages_of(s, runner.config.page_size))
    return {"step_ms": full, "non_gemm_ms": rest, "gemm_ms": full - rest}
