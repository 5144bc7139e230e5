"""A step's whole time on masks stays within ``--grammar-mask-wait-ms`` (on a fake clock).

Driven through GrammarManager's step interface (begin_step, the gate's ready, apply_masks,
end_step), as the scheduler drives it. Fake matchers advance a fake clock by what a readiness
check, a mask copy and a wake-up from a sleep cost; each mask arrives at a given time of that
clock (ready at once, during the step, or not in it). Nothing here reads the wall clock.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import BackgroundHold
from radixlm.fsm.compiled_grammar import MaskWaits
from radixlm.runtime.scheduling.grammar_manager import GrammarManager
from radixlm.runtime.scheduling.request import Req
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.sampling_params import SamplingParams

VOCAB = 64
NEVER = math.inf


class FakeClock:
    """Seconds that move only when a fake matcher says its work took time; ``off_cpu`` of
    them the scheduler thread was not running (waiting for the GIL): :meth:`cpu` excludes
    them, as the thread's CPU clock does."""

    def __init__(self) -> None:
        self.t = 0.0
        self.off_cpu = 0.0

    def __call__(self) -> float:
        return self.t

    def cpu(self) -> float:
        return self.t - self.off_cpu


@dataclass(frozen=True)
class Costs:
    check: float  # one readiness check
    copy: float  # one mask copied into the step's rows
    wake: float  # from a sleep's end (timeout or mask) to the scheduler running again
    gil: float = 0.0  # a readiness check waits this long for the GIL (the worker has it)


class TimedMatcher:
    """A matcher whose mask, all bits ``tag``, is ready from ``arrival`` on the fake clock."""

    def __init__(self, clock: FakeClock, costs: Costs, tag: int) -> None:
        self.clock, self.costs, self.tag = clock, costs, tag
        self.grammar = SimpleNamespace(waits=MaskWaits())
        self.num_tokens = 0
        self.arrival = 0.0
        self.background: BackgroundHold | None = None  # the worker's hold, when observed
        self.held_at: list[tuple[str, bool]] = []  # (call, the hold in force then)

    def _observe(self, call: str) -> None:
        if self.background is not None:
            self.held_at.append((call, self.background.held))

    def mask_ready(self) -> bool:
        self._observe("check")
        self.clock.t += self.costs.check + self.costs.gil
        self.clock.off_cpu += self.costs.gil
        return self.clock.t >= self.arrival

    def wait_mask_ready(self, seconds: float) -> bool:
        self._observe("sleep")
        now = self.clock.t
        ready = self.arrival <= now + seconds
        self.clock.t = (max(now, self.arrival) if ready else now + seconds) + self.costs.wake
        return ready

    def fill_bitmask(self, row: np.ndarray) -> None:
        self._observe("copy")
        self.clock.t += self.costs.copy
        row[:] = self.tag


class RecordingOps:
    def __init__(self) -> None:
        self.masks: list[torch.Tensor] = []

    def apply_token_bitmask(self, logits, masks, index) -> None:
        self.masks.append(masks.clone())


def setup(bound_ms: float, costs: Costs, n: int
          ) -> tuple[GrammarManager, FakeClock, list[Req], RecordingOps]:
    clock, ops = FakeClock(), RecordingOps()
    gm = GrammarManager(ServerArgs(model_path="unused", grammar_mask_wait_ms=bound_ms), None,
                        VOCAB, [0], ops, clock=clock, cpu_clock=clock.cpu)
    gm._compiler = SimpleNamespace(prefetch=lambda matcher: False,  # no worker here
                                   background=BackgroundHold())
    gm.run_queue = SimpleNamespace(seconds=lambda: 0.0)  # never preempted: off CPU = GIL
    reqs = [Req(rid=f"r{i}", token_ids=[1, 2], prompt_len=2, grammar_active=True,
                grammar=TimedMatcher(clock, costs, tag=i + 1),
                sampling=SamplingParams(max_new_tokens=4)) for i in range(n)]
    return gm, clock, reqs, ops


def step(gm: GrammarManager, clock: FakeClock, reqs: list[Req], arrivals: list[float]):
    """One scheduler step: the masks arrive ``arrivals`` seconds from its start."""
    for req, delay in zip(reqs, arrivals, strict=True):
        req.grammar.arrival = clock.t + delay
    gate = gm.begin_step()
    admitted = [r for r in reqs if gate.ready(r)]
    gate.leave()  # as the scheduler does after its last check
    if admitted:
        gm.apply_masks(admitted, torch.zeros(len(admitted), VOCAB))
    gm.end_step(ran=bool(admitted))
    return gate, admitted, gm.mask_waits.step_seconds[-1]


def test_copies_after_a_long_wake_up_still_fit_the_bound():
    """The case the issue measured: one mask never ready among 16, a slow wake-up, copies
    that add up. From the second step on (the reserve has seen the copies), every step's
    recorded time is within the 1 ms bound, and only the request without a mask is held."""
    costs = Costs(check=2e-6, copy=20e-6, wake=0.45e-3)
    gm, clock, reqs, _ = setup(1.0, costs, 16)
    arrivals = [0.0] * 8 + [NEVER] + [0.0] * 7
    recorded = []
    for _ in range(6):
        gate, admitted, seconds = step(gm, clock, reqs, arrivals)
        assert [r.rid for r in gate.held] == ["r8"]
        assert len(admitted) == 15
        recorded.append(seconds)
    # 16 checks + 15 copies + 0.45 ms wake-up = 0.78 ms: with a 0.5 ms sleep, 1.28 ms.
    assert recorded[0] > 1e-3, "the first step had no fill history yet (documented)"
    assert max(recorded[1:]) <= 1e-3 + 1e-12


def test_the_masks_are_copied_in_the_gate_and_nothing_is_filled_after_it():
    costs = Costs(check=1e-6, copy=10e-6, wake=0.1e-3)
    gm, clock, reqs, ops = setup(1.0, costs, 4)
    gate, admitted, seconds = step(gm, clock, reqs, [0.0, 0.2e-3, NEVER, 0.0])
    assert [r.rid for r in admitted] == ["r0", "r1", "r3"]
    assert seconds == gate.spent, "the step's time is the gate's: no fill loop after it"
    (masks,) = ops.masks
    assert masks[:, 0].tolist() == [1, 2, 4], "each admitted row holds its own mask"


def test_a_matcher_moved_after_the_gate_gets_its_new_mask_counted_as_a_late_fill():
    costs = Costs(check=1e-6, copy=10e-6, wake=0.0)
    gm, clock, reqs, ops = setup(1.0, costs, 2)
    gate = gm.begin_step()
    assert gate.ready(reqs[0]) and gate.ready(reqs[1])
    reqs[1].grammar.num_tokens += 1  # as if it accepted a token: its row is stale
    reqs[1].grammar.tag = 9
    gm.apply_masks(reqs, torch.zeros(2, VOCAB))
    gm.end_step(ran=True)
    assert ops.masks[0][:, 0].tolist() == [1, 9]
    assert gm.mask_waits.step_seconds[-1] == gate.spent + costs.copy


ARRIVAL = st.sampled_from([0.0, 0.0, 0.05e-3, 0.3e-3, 0.8e-3, 3e-3, NEVER])


@settings(max_examples=150, deadline=None)
@given(bound_ms=st.sampled_from([0.3, 1.0, 2.0]),
       check=st.floats(0, 5e-6), copy=st.floats(0, 40e-6), wake=st.floats(0, 0.45e-3),
       steps=st.integers(1, 16).flatmap(
           lambda n: st.lists(st.lists(ARRIVAL, min_size=n, max_size=n), min_size=1,
                              max_size=24)))
def test_a_step_stays_within_the_bound_when_the_recent_steps_bound_its_wake_up_and_copies(
        bound_ms, check, copy, wake, steps):
    """The reserve's contract: when this step's wake-ups are no slower than the reserve's
    wake-up (a high rank of the recent ones, or the initial reserve) and its checks and
    copies take no longer than its fill (a high rank of the recent steps'), its recorded
    time is within the bound. Whatever
    the timing, a request whose mask is ready when checked runs, and none is held while it
    could still sleep for its mask (held only once the step's sleeping budget is spent)."""
    bound = bound_ms / 1e3
    gm, clock, reqs, _ = setup(bound_ms, Costs(check, copy, wake), len(steps[0]))
    for arrivals in steps:
        reserve = gm.gate_reserve
        known_wake, known_fill = reserve.wake_seconds(bound), reserve.fill_seconds()
        gate, admitted, seconds = step(gm, clock, reqs, arrivals)
        assert all(r in admitted for r, a in zip(reqs, arrivals, strict=True) if a == 0.0)
        assert seconds == gate.spent
        if gate.held:
            assert gate.spent >= gate.sleep_bound - 1e-12, "held only once the sleep is spent"
        fill = gate.spent - gate.waited
        if wake <= known_wake + 1e-15 and fill <= known_fill + 1e-15 and \
                known_wake + known_fill <= bound:
            assert seconds <= bound + 1e-12


def test_the_gil_waits_of_one_step_do_not_stop_the_next_from_sleeping():
    """A step whose checks waited for the GIL (the worker had it before it parked) records
    that wait, but the reserve learns only the step's own checks and copies: the next step
    still sleeps for its mask, and gets it (it used to learn the wait, reach the bound and
    hold the request)."""
    costs = Costs(check=2e-6, copy=10e-6, wake=50e-6, gil=0.3e-3)
    gm, clock, reqs, _ = setup(1.0, costs, 4)
    first, admitted, seconds = step(gm, clock, reqs, [0.0] * 4)
    assert len(admitted) == 4 and first.blocked == pytest.approx(4 * costs.gil)
    assert gm.mask_waits.summary()["mask_blocked_ms_max"] == pytest.approx(1.2)
    assert gm.gate_reserve.fill_seconds() == pytest.approx(4 * costs.check + 4 * costs.copy)
    for matcher in (r.grammar for r in reqs):
        matcher.costs = Costs(check=2e-6, copy=10e-6, wake=50e-6)
    second, admitted, _ = step(gm, clock, reqs, [0.0, 0.0, 0.4e-3, 0.0])
    assert second.slept and not second.held and len(admitted) == 4
    assert gm.mask_waits.summary()["mask_gate_sleeps"] == 1


def test_the_worker_is_held_during_checks_and_copies_and_lent_the_gil_while_the_gate_sleeps():
    costs = Costs(check=1e-6, copy=10e-6, wake=20e-6)
    gm, clock, reqs, _ = setup(1.0, costs, 3)
    background = gm._compiler.background
    for r in reqs:
        r.grammar.background = background
    step(gm, clock, reqs, [0.0, 0.3e-3, NEVER])
    seen = [entry for r in reqs for entry in r.grammar.held_at]
    assert {call for call, _ in seen} == {"check", "copy", "sleep"}
    assert all(held == (call != "sleep") for call, held in seen), seen
    assert not background.held, "released once the step left the gate"
