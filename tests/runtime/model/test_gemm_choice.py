"""Per-shape GEMM plans: bucket lookup, dispatch, fixed choices, and measured plans that only
name offered implementations (no assertion on which one wins: that is the machine's)."""

from __future__ import annotations

import time

import pytest
import torch
import torch.nn.functional as F

from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.gemm_choice import ChosenLinear, GemmChooser, GemmPlan
from radixlm.runtime.model.quantized_linear import float_impls, quant_impls, quantize_weight


def test_plan_picks_the_next_bucket_up_and_the_last_beyond():
    plan = GemmPlan((1, 8, 32), ("a", "b", "c"))
    assert [plan.pick(r) for r in (1, 2, 8, 9, 32, 33, 5000)] == list("abbcccc")
    with pytest.raises(ValueError, match="strictly increasing"):
        GemmPlan((8, 1), ("a", "b"))
    with pytest.raises(ValueError, match="one choice per bucket"):
        GemmPlan((1,), ("a", "b"))


def test_chosen_linear_dispatches_by_rows_and_adds_the_bias():
    calls = []
    impls = {"small": lambda x: calls.append("small") or x * 0,
             "big": lambda x: calls.append("big") or x * 0 + 1}
    lin = ChosenLinear(impls, GemmPlan((4, 64), ("small", "big")), torch.ones(3), 3, 3)
    assert torch.equal(lin(torch.zeros(2, 3)), torch.ones(2, 3))
    assert torch.equal(lin(torch.zeros(10, 3)), torch.full((10, 3), 2.0))
    assert calls == ["small", "big"]
    with pytest.raises(ValueError, match="not given"):
        ChosenLinear(impls, GemmPlan((1,), ("other",)), None, 3, 3)


@pytest.mark.parametrize("plan", [GemmPlan((1, 8, 32), ("a", "b", "a")),
                                  GemmPlan((1, 8, 32, 128), ("b", "b", "b", "b")),
                                  GemmPlan((4,), ("a",))], ids=str)
def test_chosen_linear_runs_what_the_plan_picks_for_every_row_count(plan):
    """The dispatch resolved to callables at construction agrees with GemmPlan.pick,
    bucket edges and row counts past the last bucket included."""
    calls: list[str] = []
    impls = {name: (lambda x, name=name: calls.append(name) or x) for name in ("a", "b")}
    lin = ChosenLinear(impls, plan, None, 3, 3)
    for rows in (1, 2, 4, 5, 8, 9, 32, 33, 128, 129, 600):
        lin(torch.zeros(rows, 3))
        assert calls.pop() == plan.pick(rows)


@pytest.mark.parametrize("kind", ["float", "int8", "int4"])
def test_measured_plans_compute_the_product(kind):
    gen = torch.Generator().manual_seed(3)
    w = torch.randn(48, 64, generator=gen)
    if kind == "float":
        impls, ref_w, tol = float_impls(w), w, 1e-5
    else:
        q = quantize_weight(w, kind, 32)
        impls, ref_w, tol = quant_impls(q), q.dequantize(), 3e-2
    chooser = GemmChooser(reps=1, buckets=(1, 16))
    lin = chooser.build(f"test-{kind}", impls, None, 64, 48)
    assert lin.plan.used <= set(impls)
    for rows in (1, 5, 40):
        x = torch.randn(rows, 64, generator=gen)
        torch.testing.assert_close(lin(x), F.linear(x, ref_w), atol=tol * 8, rtol=tol)


def test_candidates_take_turns_while_measured():
    """Each bucket: one warm-up call per candidate, then the candidates alternate rep by rep
    (a burst of load on a shared machine then hits every candidate's round alike)."""
    calls: list[tuple[str, int]] = []
    impls = {name: (lambda x, name=name: calls.append((name, x.shape[0])) or x)
             for name in ("a", "b", "c")}
    GemmChooser(reps=2, buckets=(1, 8)).build("turns", impls, None, 4, 4)
    per_bucket = ["a", "b", "c"] * 3  # warm-ups, then two rounds
    assert calls == [(n, 1) for n in per_bucket] + [(n, 8) for n in per_bucket]


def test_a_fixed_choice_skips_measuring():
    chooser = GemmChooser(fixed="torch")
    lin = chooser.build("fixed", float_impls(torch.randn(8, 16)), None, 16, 8, max_rows=8)
    assert lin.plan == GemmPlan((1, 8), ("torch", "torch")) and chooser.seconds == 0


def test_finish_retimes_streamed_buckets_over_every_linear_in_build_order():
    """Deferred linears keep every candidate until finish(); then the buckets up to
    STREAMED_ROWS are timed pass by pass over all deferred linears in build order (two keys
    interleaved, as a model's layers are): candidate c in pass c (a warm-up round, then
    reps), then the per-key winners together and each winner on every key (1-2 more passes
    here); the plans are final (unused candidates dropped), one per key."""
    calls: list[tuple[int, str, int]] = []

    def impls_of(layer: int) -> dict:
        return {name: (lambda x, name=name: calls.append((layer, name, x.shape[0])) or x)
                for name in ("a", "b")}
    chooser = GemmChooser(reps=1, buckets=(1, 8, 64))
    linears = [chooser.build("finish", impls_of(i), None, 4 + i % 2, 4, defer=True)
               for i in range(4)]  # keys alternate with in_features 4, 5
    assert all(set(lin.offered) == {"a", "b"} for lin in linears)
    calls.clear()
    chooser.finish()
    passes = [calls[i:i + 4] for i in range(0, len(calls), 4)]
    for rows in (1, 8):
        turns = [[(i, n, rows) for i in range(4)] for n in ("a", "b")] * 2
        assert passes[:4] == turns
        together = [p for p in passes[4:] if p[0][2] == rows]
        assert 2 <= len(together) <= 3
        for p in together:  # every linear in order, one candidate per key
            assert [c[0] for c in p] == [0, 1, 2, 3] and p[0][1] == p[2][1] and p[1][1] == p[3][1]
        passes = passes[4 + len(together):]
    assert passes == []  # the 64-row bucket kept its single-weight timing
    assert linears[0].plan == linears[2].plan and linears[1].plan == linears[3].plan
    assert all(lin.offered == {} for lin in linears)
    with pytest.raises(ValueError, match="keep_offered"):
        linears[0].replan(linears[0].plan)


def test_deferred_linears_time_their_streamed_buckets_once_in_finish():
    """At build a deferred linear is timed on one weight only above STREAMED_ROWS (finish()
    re-times the buckets below anyway); finish() times them even for a lone linear."""
    calls: list[int] = []
    impls = {name: (lambda x: calls.append(x.shape[0]) or x) for name in ("a", "b")}
    chooser = GemmChooser(reps=1, buckets=(1, 8, 64))
    lin = chooser.build("lone", impls, None, 4, 4, defer=True)
    assert set(calls) == {64}
    calls.clear()
    chooser.finish()
    assert set(calls) == {1, 8} and lin.offered == {}


def test_finish_leaves_single_and_fixed_linears_as_built():
    chooser = GemmChooser(fixed="torch")
    lin = chooser.build("fixed-defer", float_impls(torch.randn(8, 16)), None, 16, 8, defer=True)
    chooser.finish()
    assert lin.plan.used == {"torch"} and lin.offered == {}


def _spin(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_one_thread_measures_cpu_time_so_time_off_the_core_costs_nothing():
    """At one torch thread candidates are timed by this thread's CPU clock: a candidate that
    waits off the core (as when another process holds it) costs nothing, one that computes
    costs its CPU time; so the waiting one wins however long it waits."""
    impls = {"waits": lambda x: time.sleep(0.003) or x,
             "computes": lambda x: _spin(0.001) or x}
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert gemm_choice.measure_clock() is time.thread_time
        plan = GemmChooser(buckets=(1, 8), reps=2).plan("cpu-clock-test", impls, 4, 4, (1, 8))
    finally:
        torch.set_num_threads(threads)
    assert plan.choices == ("waits", "waits")
