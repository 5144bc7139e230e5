"""GateReserve: what a step keeps from sleeping, learnt per step from recent ones."""

from __future__ import annotations

import pytest

from radixlm.runtime.scheduling.gate_reserve import WINDOW, GateReserve, wake_reserve


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


def test_a_slow_step_ages_out_after_the_window_even_without_new_wake_ups():
    r = GateReserve()
    r.learn(2e-3, 5e-3)  # a stall: the reserve takes the whole bound for a while
    assert r.seconds(1e-3) == 1e-3
    for _ in range(WINDOW - 1):
        r.learn(0.01e-3, None)
    assert r.seconds(1e-3) == 1e-3
    r.learn(0.01e-3, None)
    assert r.seconds(1e-3) == pytest.approx(wake_reserve(1e-3) + 0.01e-3)
