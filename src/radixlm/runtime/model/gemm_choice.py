"""Each CPU linear runs the implementation that measured fastest for its shape and row count.

A weight can be multiplied several ways (MKL's ``F.linear``, oneDNN with a packed weight,
torch's weight-only int8/int4 kernels, or dequantize-then-``F.linear``), and which is fastest
depends on the shape and on the number of rows: batch-1 decode is bound by streaming the
weight, a 512-row prefill by arithmetic. :class:`GemmChooser` times every candidate once per
``(kind, out, in)`` at a few row counts (:data:`ROW_BUCKETS`) when the model loads, and
:class:`ChosenLinear` dispatches each call to its bucket's winner. Plans are shared by every
layer of the same shape and cached for the process. The decode buckets (up to
:data:`STREAMED_ROWS`) are then re-timed over the whole model in its order
(:meth:`GemmChooser.finish`): one weight timed again and again sits in L2, but in a step
each weight comes from memory after ~120 others, and kernels differ most there.

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
# up to here a call is bound by, or shares its time with, streaming its weight (timed by
# GemmChooser.finish): at 32 rows MKL ran a SmolLM2 576x576 linear at 135 GFLOP/s on one
# weight in L2 but all the model's linears at 64-72 streamed in model order (the panel GEMM
# 113), and timed alone it won qkv's 32-row bucket
STREAMED_ROWS = 32
Impl = Callable[[torch.Tensor], torch.Tensor]


def measure_clock() -> Callable[[], float]:
    """The clock candidates are timed by: this thread's CPU time when torch computes on this
    one thread (every candidate then runs on the caller's thread: memory stalls still count,
    but the time other processes hold the core does not), else the wall clock (intra-op
    workers' time is not this thread's). On a shared machine (load 6 on 2 cores) a 20 ms
    512-row call is preempted in nearly every wall-clock rep: best-of-3 then picked MKL over
    oneDNN for SmolLM2's 512-row gate_up, 24.0 vs 17.8 ms of CPU time."""
    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


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
                 in_features: int, out_features: int, keep_offered: bool = False) -> None:
        super().__init__()
        # every offered implementation while the plan may still change (:meth:`replan`)
        self.offered: Mapping[str, Impl] = impls if keep_offered else {}
        self._use(impls, plan)
        self.bias = None if bias is None else bias.detach().contiguous()
        self.in_features, self.out_features = in_features, out_features

    def _use(self, impls: Mapping[str, Impl], plan: GemmPlan) -> None:
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
        # lookup instead of a scan per call
        self._by_rows = tuple(self._impls[plan.pick(max(rows, 1))]
                              for rows in range(plan.buckets[-1] + 1))
        self._largest = self._impls[plan.choices[-1]]
        self.plan = plan

    def replan(self, plan: GemmPlan) -> None:
        """Run ``plan`` (over the implementations offered at construction), then drop the
        ones it does not use: the plan is final."""
        if not self.offered:
            raise ValueError("replan needs the linear built with keep_offered=True")
        self._use(self.offered, plan)
        self.offered = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        impl = self._only
        if impl is None:
            rows = x.shape[0]
            impl = self._by_rows[rows] if rows < len(self._by_rows) else self._largest
        y = impl(x)
        return y if self.bias is None else y + self.bias

    def extra_repr(self) -> str:
        return f"in={self.in_features}, out={self.out_features}, plan={self.plan}"


# quant_impls' names of the weight-only kernels, in the order ``fixed="quantized"`` prefers
# them: oneDNN's int8 where offered (float32-faithful activations), else torch's
QUANTIZED_KERNELS = ("int8-onednn", "int8", "int4", "q8_0")


class GemmChooser:
    """Measures candidates per ``(kind, out, in)`` (once per process) and builds linears.

    ``fixed`` names one implementation to use everywhere it is offered, skipping the
    measurement (``"quantized"``: the weight-only kernel, the first of
    :data:`QUANTIZED_KERNELS` offered, wherever a linear has one: numerics that do not depend
    on timings); ``max_rows`` caps the buckets measured (the LM head never sees 512 rows).
    """

    _cache: dict[tuple[object, ...], GemmPlan] = {}
    _streamed: set[tuple[object, ...]] = set()  # keys whose cached plan :meth:`finish` timed
    # deferred keys' plans before finish(): the streamed buckets hold a placeholder (the
    # first candidate), since finish() times them anyway (they were timed twice: on a
    # Gemma-3-270M-shaped float model 8-10% of the chooser's CPU time, plans unchanged)
    _partial: dict[tuple[object, ...], GemmPlan] = {}

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
        self._pending: list[tuple[tuple[object, ...], ChosenLinear]] = []  # for finish()

    def build(self, kind: str, impls: Mapping[str, Impl], bias: torch.Tensor | None,
              in_features: int, out_features: int, max_rows: int | None = None,
              defer: bool = False) -> ChosenLinear:
        """A linear on the plan measured for its key. ``defer``: it keeps every candidate
        until :meth:`finish` re-times the streamed buckets over all deferred linears of
        its key (a model's layers), the way a decode step calls them."""
        buckets = tuple(b for b in self.buckets if max_rows is None or b <= max_rows)
        buckets = buckets or self.buckets[:1]
        keep = defer and len(impls) > 1 and self._fixed_in(impls) is None
        if keep:
            plan = self._partial_plan(kind, impls, in_features, out_features, buckets)
        else:
            plan = self.plan(kind, impls, in_features, out_features, buckets)
        linear = ChosenLinear(impls, plan, bias, in_features, out_features, keep_offered=keep)
        if keep:
            key = self._key(kind, impls, in_features, out_features, buckets)
            self._pending.append((key, linear))
        return linear

    def finish(self) -> None:
        """Final plans for the deferred linears. The buckets up to :data:`STREAMED_ROWS` are
        re-timed over every deferred linear in build order (a model's order: a decode step's),
        each call timed on its own, so each weight comes from wherever the others' streaming
        left it, as in a step. Timing one weight again and again keeps it in L2, where torch's
        int8 kernel measured 2-3x faster than from memory and so won against kernels that
        stream better. The other buckets keep the single-weight timing."""
        start = time.perf_counter()
        fresh = [(key, linear) for key, linear in self._pending if key not in self._streamed]
        if fresh:  # their streamed buckets hold placeholders (:meth:`_partial_plan`)
            for key, plan in _streamed_plans(fresh, self.reps, self.dtype).items():
                self._cache[key] = plan
                self._streamed.add(key)
                logger.debug("gemm plan %s, streamed: %s", key[:3], plan)
        for key, linear in self._pending:
            linear.replan(self._cache.get(key, linear.plan))
        self._pending.clear()
        self.seconds += time.perf_counter() - start

    def _key(self, kind: str, impls: Mapping[str, Impl], in_features: int, out_features: int,
             buckets: tuple[int, ...]) -> tuple[object, ...]:
        return (kind, out_features, in_features, torch.get_num_threads(), tuple(sorted(impls)),
                buckets, self.dtype)

    def plan(self, kind: str, impls: Mapping[str, Impl], in_features: int, out_features: int,
             buckets: tuple[int, ...]) -> GemmPlan:
        fixed = self._fixed_in(impls)
        if fixed is not None:
            return GemmPlan(buckets, (fixed,) * len(buckets))
        if len(impls) == 1:
            return GemmPlan(buckets, (next(iter(impls)),) * len(buckets))
        key = self._key(kind, impls, in_features, out_features, buckets)
        if key not in self._cache:
            start = time.perf_counter()
            self._cache[key] = self._measure(impls, in_features, buckets)
            self.seconds += time.perf_counter() - start
            logger.debug("gemm plan %s: %s", key[:3], self._cache[key])
        return self._cache[key]

    def _partial_plan(self, kind: str, impls: Mapping[str, Impl], in_features: int,
                      out_features: int, buckets: tuple[int, ...]) -> GemmPlan:
        """A deferred linear's plan until :meth:`finish`: the final one where its key was
        timed already, else the buckets above :data:`STREAMED_ROWS` measured on one weight
        and the first candidate, a placeholder, in the streamed ones."""
        key = self._key(kind, impls, in_features, out_features, buckets)
        if key in self._cache:
            return self._cache[key]
        if key not in self._partial:
            start = time.perf_counter()
            self._partial[key] = self._measure(impls, in_features, buckets,
                                               placeholder_up_to=STREAMED_ROWS)
            self.seconds += time.perf_counter() - start
        return self._partial[key]

    def _fixed_in(self, impls: Mapping[str, Impl]) -> str | None:
        if self.fixed == "quantized":
            return next((n for n in QUANTIZED_KERNELS if n in impls), None)
        return self.fixed if self.fixed in impls else None

    def _measure(self, impls: Mapping[str, Impl], in_features: int,
                 buckets: tuple[int, ...], placeholder_up_to: int = 0) -> GemmPlan:
        gen = torch.Generator().manual_seed(0)
        choices = []
        for rows in buckets:
            if rows <= placeholder_up_to:  # timed later, by finish()
                choices.append(next(iter(impls)))
                continue
            x = torch.randn(rows, in_features, generator=gen).to(self.dtype)
            best = _best_times(impls, x, self.reps)
            choices.append(min(best, key=best.__getitem__))
        return GemmPlan(buckets, tuple(choices))


@torch.inference_mode()
def _best_times(impls: Mapping[str, Impl], x: torch.Tensor, reps: int) -> dict[str, float]:
    """Best-of-``reps`` seconds (:func:`measure_clock`) of each ``impl(x)`` after one warm-up
    call each, the candidates taking turns rep by rep: on a shared machine a burst of load
    then slows every candidate's round alike instead of all reps of one (min: interruptions
    only add time)."""
    for fn in impls.values():
        fn(x)
    best = dict.fromkeys(impls, float("inf"))
    clock = measure_clock()
    for _ in range(reps):
        for name, fn in impls.items():
            start = clock()
            fn(x)
            best[name] = min(best[name], clock() - start)
    return best


Key = tuple[object, ...]
Assignment = dict[Key, str]  # one candidate per key for a whole pass


def _streamed_plans(order: list[tuple[Key, ChosenLinear]], reps: int,
                    dtype: torch.dtype) -> dict[Key, GemmPlan]:
    """Each key's plan with its streamed buckets chosen over passes through ``order``
    (linears of one key offer the same candidates), per bucket in two rounds:

    1. candidate ``c`` of every key in pass ``c`` (turns): each key's fastest per call;
    2. those winners together, against each winning candidate on every key offering it:
       the smallest whole pass. Kernels leave state behind that slows the next different
       one (an int8 call before a oneDNN u8s8 one: 0.24 vs 0.21 ms, 3072x576), so the
       per-call winners can lose together to one kernel everywhere.
    """
    first = {key: linear for key, linear in reversed(order)}  # each key's first linear
    names = {key: list(linear.offered) for key, linear in first.items()}
    choices = {key: list(linear.plan.choices) for key, linear in first.items()}
    gen = torch.Generator().manual_seed(0)
    streamed = sorted({b for lin in first.values() for b in lin.plan.buckets if b <= STREAMED_ROWS})
    for rows in streamed:
        steps = [(key, lin) for key, lin in order if rows in first[key].plan.buckets]
        keys = list(dict.fromkeys(key for key, _ in steps))
        xs = {lin.in_features: torch.randn(rows, lin.in_features, generator=gen).to(dtype)
              for _, lin in steps}
        turns = [{key: names[key][c % len(names[key])] for key in keys}
                 for c in range(max(len(names[key]) for key in keys))]
        per_call, _ = _pass_times(steps, turns, xs, reps, warm_up=True)
        winners = {key: min(names[key], key=lambda n, key=key: per_call[key, n])
                   for key in keys}
        together = [winners] + [{key: n if n in names[key] else winners[key] for key in keys}
                                for n in dict.fromkeys(winners.values())]
        _, totals = _pass_times(steps, together, xs, reps, warm_up=False)
        chosen = together[totals.index(min(totals))]
        for key in keys:
            choices[key][first[key].plan.buckets.index(rows)] = chosen[key]
    return {key: GemmPlan(lin.plan.buckets, tuple(choices[key])) for key, lin in first.items()}


@torch.inference_mode()
def _pass_times(steps: list[tuple[Key, ChosenLinear]], assignments: list[Assignment],
                xs: Mapping[int, torch.Tensor], reps: int,
                warm_up: bool) -> tuple[dict[tuple[Key, str], float], list[float]]:
    """Passes over ``steps`` (each linear on its key's candidate in the assignment), the
    assignments taking turns ``reps`` times (as in :func:`_best_times`), after a warm-up
    round if ``warm_up``: (best mean seconds per call of each ``(key, candidate)``, best
    seconds of each assignment's whole pass)."""
    per_call: dict[tuple[Key, str], float] = {}
    totals = [float("inf")] * len(assignments)
    clock = measure_clock()
    for rep in range(reps + warm_up):
        for a, assignment in enumerate(assignments):
            spent: dict[tuple[Key, str], list[float]] = {}
            for key, linear in steps:
                name = assignment[key]
                start = clock()
                linear.offered[name](xs[linear.in_features])
                spent.setdefault((key, name), []).append(clock() - start)
            if rep or not warm_up:
                for kn, times in spent.items():
                    per_call[kn] = min(per_call.get(kn, float("inf")), sum(times) / len(times))
                totals[a] = min(totals[a], sum(sum(times) for times in spent.values()))
    return per_call, totals
