"""GateReserve: what a step keeps from sleeping, learnt per step from recent ones (one-off
stalls left out)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.runtime.scheduling.gate_reserve import (
    OUTLIER_EVERY,
    WINDOW,
    GateReserve,
    outliers,
    wake_reserve,
)


@pytest.mark.parametrize("bound", [0.4e-3, 1e-3, 5e-3])
def test_before_any_step_the_reserve_is_the_initial_wake_up(bound):
    assert GateReserve().seconds(bound) == wake_reserve(bound)


def test_the_reserve_is_the_slowest_recent_wake_up_plus_the_longest_recent_fill():
    r = GateReserve()
    r.learn(0.1e-3, None)  # a step that did not sleep (or got its mask): no wake-up learnt
    assert r.seconds(1e-3) == pytest.approx(wake_reserve(1e-3) + 0.1e-3)
    r.learn(0.05e-3, 0.2e-3)
    r.learn(0.02e-3, 0.3e-3)
    assert r.seconds(1e-3) == pytest.approx(0.3e-3 + 0.1e-3)
    assert r.seconds(0.2e-3) == 0.2e-3, "at most the whole bound: then no sleeping at all"


def test_a_one_off_stall_stops_holding_the_gate_back_once_the_window_can_tell_it_apart():
    """One stall (the whole bound, wake-up and fill) among small steps: the reserve takes the
    whole bound only until OUTLIER_EVERY steps are seen, not for a whole window (the gate
    does not sleep meanwhile, so it learns no new wake-up: the stall must age out alone)."""
    r = GateReserve()
    r.learn(2e-3, 5e-3)
    assert r.seconds(1e-3) == 1e-3
    for _ in range(OUTLIER_EVERY - 2):
        r.learn(0.01e-3, None)
    assert r.seconds(1e-3) == 1e-3, "fewer than OUTLIER_EVERY steps: the maximum"
    r.learn(0.01e-3, None)
    assert r.seconds(1e-3) == pytest.approx(wake_reserve(1e-3) + 0.01e-3)
    for _ in range(WINDOW):
        r.learn(0.01e-3, None)
    assert r.seconds(1e-3) == pytest.approx(wake_reserve(1e-3) + 0.01e-3), "aged out"


def test_a_recurring_slow_step_is_reserved_through_the_window():
    r = GateReserve()
    for i in range(WINDOW):
        r.learn(0.6e-3 if i % 8 == 0 else 0.01e-3, 0.3e-3 if i % 8 == 0 else None)
    assert outliers(WINDOW) < WINDOW // 8, "4 slow steps in 32: more than the outliers"
    assert r.fill_seconds() == 0.6e-3 and r.wake_seconds(1e-3) == 0.3e-3
    assert r.seconds(1e-3) == pytest.approx(0.9e-3)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 5e-3), st.none() | st.floats(0, 5e-3)),
                min_size=1, max_size=3 * WINDOW),
       st.sampled_from([0.3e-3, 1e-3, 2e-3]))
def test_the_reserve_covers_all_recent_steps_but_the_outliers(steps, bound):
    """The rule the gate's bound rests on: the reserve's fill is at least every recent
    step's own fill but the slowest ``outliers(n)`` of them, and is one of them (a recent
    step's, never more); so is its wake-up, where enough sleeps timed out to rank them."""
    r = GateReserve()
    for fill, wake in steps:
        r.learn(fill, wake)
    recent = steps[-WINDOW:]
    n, fills = len(recent), sorted((f for f, _ in recent), reverse=True)
    k = outliers(n)
    assert r.fill_seconds() in fills and all(r.fill_seconds() >= f for f in fills[k:])
    wakes = sorted((w for _, w in recent if w is not None), reverse=True)
    if len(wakes) > k:
        assert r.wake_seconds(bound) == wakes[k]
    else:
        assert r.wake_seconds(bound) <= wake_reserve(bound)
    assert r.seconds(bound) == min(bound, r.wake_seconds(bound) + r.fill_seconds())
