"""StepMaskGate on its own: one bound per step shared by its requests; holds are counted."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

from radixlm.runtime.scheduling.gate_reserve import WAKE_RESERVE_SECONDS, wake_reserve
from radixlm.runtime.scheduling.mask_gate import StepMaskGate
from radixlm.runtime.scheduling.mask_wait_stats import MaskWaitStats
from radixlm.runtime.scheduling.request import Req
from radixlm.runtime.wire.sampling_params import SamplingParams


@dataclass
class StepClock:
    """A clock that moves only when a fake wait sleeps: the gate's arithmetic, not the
    machine's load, decides what these tests see (a loaded core once overran a 1 ms bound
    before the first wait was offered)."""

    now: float = 0.0

    def __call__(self) -> float:
        return self.now


@dataclass
class FakeMatcher:
    """Ready after ``ready_after`` readiness checks; records the waits it was offered (and
    moves ``clock`` by them where one is given, instead of sleeping)."""

    ready_after: int = 0
    checks: int = 0
    offered: list[float] = field(default_factory=list)
    clock: StepClock | None = None

    def mask_ready(self) -> bool:
        self.checks += 1
        return self.checks > self.ready_after

    def wait_mask_ready(self, seconds: float) -> bool:
        self.offered.append(seconds)
        if self.clock is not None:
            self.clock.now += seconds
        else:
            time.sleep(seconds)  # as the real wait: at least that long when nothing arrives
        return False


def req(rid: str, matcher: FakeMatcher | None, active: bool = True) -> Req:
    return Req(rid=rid, token_ids=[1, 2], prompt_len=2, grammar=matcher, grammar_active=active,
               sampling=SamplingParams(max_new_tokens=4))


def gate(bound: float, stats: MaskWaitStats, prefetched: list[str],
         clock: StepClock | None = None) -> StepMaskGate:
    timed = {} if clock is None else {"clock": clock, "cpu_clock": StepClock()}
    return StepMaskGate(bound, stats, lambda r: prefetched.append(r.rid), lambda r: None,
                        **timed)


def test_unconstrained_and_inactive_requests_always_run_and_are_not_checked():
    stats, prefetched = MaskWaitStats(), []
    g = gate(0.0, stats, prefetched)
    slow = FakeMatcher(ready_after=99)
    assert g.ready(req("free", None)) and g.ready(req("thinking", slow, active=False))
    assert g.checked == 0 and slow.checks == 0 and not g.held


def test_a_zero_bound_never_waits_and_holds_what_is_not_ready():
    stats, prefetched = MaskWaitStats(), []
    g = gate(0.0, stats, prefetched)
    slow, ready = FakeMatcher(ready_after=1), FakeMatcher()
    held, fine = req("slow", slow), req("ready", ready)
    assert not g.ready(held) and g.ready(fine)
    assert slow.offered == [], "bound 0: not even a zero-length wait"
    assert g.held == [held] and prefetched == ["slow"], "held: its mask asked for again"
    assert held.mask_held_steps == 1 and fine.mask_held_steps == 0


def test_the_bound_is_shared_by_the_step_not_given_to_each_request():
    stats, prefetched = MaskWaitStats(), []
    clock = StepClock()
    g = gate(1e-3, stats, prefetched, clock)
    first, second = FakeMatcher(ready_after=5, clock=clock), FakeMatcher(ready_after=5, clock=clock)
    assert not g.ready(req("a", first)) and not g.ready(req("b", second))
    assert len(first.offered) == 1 and 0 < first.offered[0] <= 1e-3 + 1e-9
    assert sum(first.offered + second.offered) <= 1e-3 + 1e-9, "one deadline for the step"


@pytest.mark.parametrize("held_for", [1, 3])
def test_a_request_rejoining_records_one_hold_of_its_length(held_for):
    stats, prefetched = MaskWaitStats(), []
    matcher = FakeMatcher(ready_after=held_for)
    r = req("r", matcher)
    for _ in range(held_for):
        g = gate(0.0, stats, prefetched)
        assert not g.ready(r)
    assert gate(0.0, stats, prefetched).ready(r)
    assert r.mask_held_steps == 0
    assert (stats.holds, stats.max_hold_steps) == (1, held_for)


@pytest.mark.parametrize("bound", [0.4e-3, 1e-3, 5e-3])
def test_the_sleeping_ends_early_enough_for_the_wake_up_to_fit_in_the_bound(bound):
    stats, prefetched = MaskWaitStats(), []
    clock = StepClock()
    g = gate(bound, stats, prefetched, clock)
    slow = FakeMatcher(ready_after=5, clock=clock)
    assert not g.ready(req("slow", slow))
    reserve = wake_reserve(bound)
    assert reserve == min(WAKE_RESERVE_SECONDS, bound / 2) and reserve > 0
    assert len(slow.offered) == 1 and slow.offered[0] <= bound - reserve + 1e-9


class CollectingMatcher(FakeMatcher):
    """Its wait runs a garbage collection, as the compiler's worker may trigger one."""

    def wait_mask_ready(self, seconds: float) -> bool:
        import gc

        gc.collect()
        return super().wait_mask_ready(seconds)


def test_a_collection_during_the_wait_is_counted_by_the_gate():
    stats, prefetched = MaskWaitStats(), []
    g = gate(1e-3, stats, prefetched)
    assert not g.ready(req("slow", CollectingMatcher(ready_after=5)))
    assert 0 < g.gc_paused <= g.waited
