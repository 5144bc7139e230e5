"""Each CPU linear runs the implementation that measured fastest for its shape and row count.

A weight can be multiplied several ways (MKL's ``F.linear``, oneDNN with a packed weight,
torch's weight-only int8/int4 kernels, or dequantize-then-``F.linear``), and which is fastest
depends on the shape and on the number of rows: batch-1 decode is bound by streaming the
weight, a 512-row prefill by arithmetic. :class:`GemmChooser` times every candidate once per
``(kind, out, in)`` at a few row counts (:data:`ROW_BUCKETS`) when the model loads, and
:class:`ChosenLinear` dispatches each call to its bucket's winner. Plans are shared by every
layer of the same shape and cached for the process.

Candidates compute the same product, but not bit-identically (summation order, and the
quantized kernels' bfloat16 roundings), so with more than one candidate in a plan a row's
result can depend on how many rows share its call (~1e-6 relative in float32). A fixed
choice (``--cpu-gemm onednn`` or ``torch``) makes float32 rows batch-independent again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

logger = logging.getLogger(__name__)

ROW_BUCKETS = (1, 8, 32, 128, 512)  # row counts measured; a call uses the next one up
Impl = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class GemmPlan:
    """The winning implementation per row bucket: rows <= buckets[i] use choices[i]."""

    buckets: tuple[int, ...]
    choices: tuple[str, ...]

    def __post_init__(self) -> None:
        if not self.buckets or len(self.buckets) != len(self.choices):
            raise ValueError("a plan needs one choice per bucket, at least one bucket")
        if list(self.buckets) != sorted(set(self.buckets)):
            raise ValueError(f"buckets must be strictly increasing, got {self.buckets}")

    def pick(self, rows: int) -> str:
        # a plain scan of <= 5 buckets (traceable by torch.compile, unlike bisect)
        for bucket, choice in zip(self.buckets, self.choices):
            if rows <= bucket:
                return choice
        return self.choices[-1]

    @property
    def used(self) -> frozenset[str]:
        return frozenset(self.choices)


class ChosenLinear(nn.Module):
    """``y = x @ W.T + b`` (x ``[rows, in]``) through the plan's choice for ``rows``."""

    def __init__(self, impls: Mapping[str, Impl], plan: GemmPlan, bias: torch.Tensor | None,
                 in_features: int, out_features: int) -> None:
        super().__init__()
        missing = plan.used - set(impls)
        if missing:
            raise ValueError(f"plan uses implementations {sorted(missing)} that are not given")
        # keep only what the plan runs (drops e.g. an unused packed copy of the weight)
        self._impls = {name: impls[name] for name in plan.used}
        # the plan resolved to callables once: a step calls ~120 linears, and a decode step
        # is bound by per-call overhead outside the GEMMs (one lookup, no scan, when the
        # plan runs one implementation everywhere)
        self._only = self._impls[plan.choices[0]] if len(plan.used) == 1 else None
        # otherwise the winner for every row count up to the largest bucket, by index: a
        # lookup instead of a scan per call (~4 us a call at batch 1, ~0.5 ms a step)
        self._by_rows = tuple(self._impls[plan.pick(max(rows, 1))]
                              for rows in range(plan.buckets[-1] + 1))
        self._largest = self._impls[plan.choices[-1]]
        self.plan = plan
        self.bias = None if bias is None else bias.detach().contiguous()
        self.in_features, self.out_features = in_features, out_features

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        impl = self._only
        if impl is None:
            rows = x.shape[0]
            impl = self._by_rows[rows] if rows < len(self._by_rows) else self._largest
        y = impl(x)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, plan={self.plan}"


QUANTIZED_KERNELS = ("int8", "int4", "q8_0")  # quant_impls' names of the weight-only kernels


class GemmChooser:
    """Measures candidates per ``(kind, out, in)`` (once per process) and builds linears.

    ``fixed`` names one implementation to use everywhere it is offered, skipping the
    measurement (``"quantized"`` means the weight-only kernel, ``int8`` or ``int4``, wherever
    a linear has one: numerics that do not depend on timings); ``max_rows`` caps the buckets
    measured (the LM head never sees 512 rows).
    """

    _cache: dict[tuple[object, ...], GemmPlan] = {}

    def __init__(self, fixed: str | None = None, reps: int = 3,
                 buckets: tuple[int, ...] = ROW_BUCKETS,
                 dtype: torch.dtype = torch.float32) -> None:
        if reps < 1:
            raise ValueError(f"reps must be >= 1, got {reps}")
        self.fixed = fixed
        self.reps = reps
        self.buckets = buckets
        self.dtype = dtype
        self.seconds = 0.0  # spent measuring (for the start-up log)

    def build(self, kind: str, impls: Mapping[str, Impl], bias: torch.Tensor | None,
              in_features: int, out_features: int, max_rows: int | None = None) -> ChosenLinear:
        buckets = tuple(b for b in self.buckets if max_rows is None or b <= max_rows)
        buckets = buckets or self.buckets[:1]
        plan = self.plan(kind, impls, in_features, out_features, buckets)
        return ChosenLinear(impls, plan, bias, in_features, out_features)

    def plan(self, kind: str, impls: Mapping[str, Impl], in_features: int, out_features: int,
             buckets: tuple[int, ...]) -> GemmPlan:
        fixed = self._fixed_in(impls)
        if fixed is not None:
            return GemmPlan(buckets, (fixed,) * len(buckets))
        if len(impls) == 1:
            return GemmPlan(buckets, (next(iter(impls)),) * len(buckets))
        key = (kind, out_features, in_features, torch.get_num_threads(), tuple(sorted(impls)),
               buckets, self.dtype)
        if key not in self._cache:
            start = time.perf_counter()
            self._cache[key] = self._measure(impls, in_features, buckets)
            self.seconds += time.perf_counter() - start
            logger.debug("gemm plan %s: %s", key[:3], self._cache[key])
        return self._cache[key]

    def _fixed_in(self, impls: Mapping[str, Impl]) -> str | None:
        if self.fixed == "quantized":
            return next((n for n in QUANTIZED_KERNELS if n in impls), None)
        return self.fixed if self.fixed in impls else None

    def _measure(self, impls: Mapping[str, Impl], in_features: int,
                 buckets: tuple[int, ...]) -> GemmPlan:
        gen = torch.Generator().manual_seed(0)
        choices = []
        for rows in buckets:
            x = torch.randn(rows, in_features, generator=gen).to(self.dtype)
            best = _best_times(impls, x, self.reps)
            choices.append(min(best, key=best.__getitem__))
        return GemmPlan(buckets, tuple(choices))


@torch.inference_mode()
def _best_times(impls: Mapping[str, Impl], x: torch.Tensor, reps: int) -> dict[str, float]:
    """Best-of-``reps`` seconds of each ``impl(x)`` after one warm-up call each, the
    candidates taking turns rep by rep: on a shared machine a burst of load then slows every
    candidate's round alike instead of all reps of one (min: interruptions only add time)."""
    for fn in impls.values():
        fn(x)
    best = dict.fromkeys(impls, float("inf"))
    for _ in range(reps):
        for name, fn in impls.items():
            start = time.perf_counter()
            fn(x)
            best[name] = min(best[name], time.perf_counter() - start)
    return best
