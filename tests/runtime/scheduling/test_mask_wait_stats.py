"""The scheduler's record of how long its steps waited for token masks."""

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from radixlm.runtime.scheduling.mask_wait_stats import WINDOW, MaskWaitStats, RunQueueClock


def test_empty_summary_is_zero() -> None:
    summary = MaskWaitStats().summary()
    assert summary == {"mask_wait_steps": 0, "mask_wait_cold_fills": 0, "mask_wait_ms_p50": 0.0,
                       "mask_wait_ms_p99": 0.0, "mask_wait_ms_max": 0.0,
                       "mask_wait_ms_p99_not_preempted": 0.0,
                       "mask_wait_ms_max_not_preempted": 0.0,
                       "mask_gate_ms_p99": 0.0, "mask_gate_ms_max": 0.0,
                       "mask_fill_ms_p50": 0.0, "mask_fill_ms_p99": 0.0,
                       "mask_gate_sleeps": 0, "mask_blocked_ms_p99": 0.0,
                       "mask_blocked_ms_max": 0.0,
                       "mask_wait_steps_with_gc": 0, "mask_wait_gc_ms_max": 0.0,
                       "mask_held_steps": 0, "mask_holds": 0, "mask_max_hold_steps": 0,
                       "mask_idle_wait_ms": 0.0, "grammar_advances": 0,
                       "grammar_advances_deferred": 0,
                       "grammar_advance_ms_p50": 0.0, "grammar_advance_ms_p99": 0.0,
                       "grammar_advance_ms_max": 0.0, "grammar_steps": 0,
                       "grammar_step_ms_p50": 0.0, "grammar_step_ms_p99": 0.0,
                       "grammar_step_ms_max": 0.0, "grammar_step_ms_p50_not_preempted": 0.0,
                       "grammar_step_ms_p99_not_preempted": 0.0,
                       "grammar_step_ms_max_not_preempted": 0.0}


@given(st.lists(st.integers(min_value=1, max_value=50), max_size=30))
def test_holds_count_request_steps_and_the_longest(episodes: list[int]) -> None:
    stats = MaskWaitStats()
    for steps in episodes:
        for _ in range(steps):
            stats.held(1)
        stats.rejoined(steps)
    s = stats.summary()
    assert s["mask_held_steps"] == sum(episodes) and s["mask_holds"] == len(episodes)
    assert s["mask_max_hold_steps"] == max(episodes, default=0)


def test_percentiles_in_milliseconds() -> None:
    stats = MaskWaitStats()
    for i in range(100):
        stats.record((i + 1) * 1e-5, cold=1 if i == 99 else 0)  # 0.01 .. 1.0 ms
    s = stats.summary()
    assert s["mask_wait_steps"] == 100 and s["mask_wait_cold_fills"] == 1
    assert abs(s["mask_wait_ms_p50"] - 0.51) < 1e-9
    assert abs(s["mask_wait_ms_p99"] - 1.0) < 1e-9
    assert abs(s["mask_wait_ms_max"] - 1.0) < 1e-9


def test_advances_are_timed_apart_from_steps() -> None:
    stats = MaskWaitStats()
    for i in range(200):
        stats.advanced((i + 1) * 1e-5)  # 0.01 .. 2.0 ms
    s = stats.summary()
    assert s["grammar_advances"] == 200 and s["mask_wait_steps"] == 0
    assert abs(s["grammar_advance_ms_p50"] - 1.01) < 1e-9
    assert abs(s["grammar_advance_ms_p99"] - 1.99) < 1e-9
    assert abs(s["grammar_advance_ms_max"] - 2.0) < 1e-9


def test_a_steps_grammar_time_is_its_masks_plus_its_advances() -> None:
    stats = MaskWaitStats()
    for i in range(100):  # masks 0.01 .. 1.0 ms, then two advances of 0.5 and 0.25 ms
        stats.advanced(0.5e-3)
        stats.record((i + 1) * 1e-5, cold=0)
        stats.advanced(0.25e-3)
        stats.close_step()
    stats.close_step()  # no grammar work since the last close: no step
    stats.deferred(2e-3)  # a step whose only grammar work was a deferral's check
    stats.close_step()
    s = stats.summary()
    assert s["grammar_steps"] == 101 and s["mask_wait_steps"] == 100
    assert s["grammar_advances"] == 201 and s["grammar_advances_deferred"] == 1
    assert abs(s["grammar_step_ms_p50"] - (0.51 + 0.75)) < 1e-9
    assert abs(s["grammar_step_ms_p99"] - 1.75) < 1e-9  # 1.0 + 0.75, the second longest
    assert abs(s["grammar_step_ms_max"] - 2.0) < 1e-9
    assert s["grammar_step_ms_max"] >= s["mask_wait_ms_max"]
    assert s["grammar_step_ms_max"] >= s["grammar_advance_ms_max"]


@given(st.lists(st.tuples(st.floats(min_value=0, max_value=1),
                          st.lists(st.floats(min_value=0, max_value=1), max_size=4)),
                min_size=1, max_size=50))
def test_grammar_steps_sum_each_steps_work(steps: list[tuple[float, list[float]]]) -> None:
    stats = MaskWaitStats()
    for mask, advances in steps:
        stats.record(mask, cold=0)
        for a in advances:
            stats.advanced(a)
        stats.close_step()
    assert list(stats.grammar_step_seconds) == [m + sum(a, 0.0) for m, a in steps]
    s = stats.summary()
    assert s["grammar_step_ms_p50"] <= s["grammar_step_ms_p99"] <= s["grammar_step_ms_max"]
    assert s["grammar_step_ms_max"] >= s["mask_wait_ms_max"]


@given(st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=3 * WINDOW // 2))
def test_window_is_bounded_and_ordered(values: list[float]) -> None:
    stats = MaskWaitStats()
    for v in values:
        stats.record(v, cold=0)
    s = stats.summary()
    recent = values[-WINDOW:]
    assert len(stats.step_seconds) == len(recent) and s["mask_wait_steps"] == len(values)
    assert s["mask_wait_ms_p50"] <= s["mask_wait_ms_p99"] <= s["mask_wait_ms_max"]
    assert s["mask_wait_ms_max"] == 1e3 * max(recent)


def test_time_off_the_cpu_is_reported_apart() -> None:
    stats = MaskWaitStats()
    stats.record(5e-3, cold=0, preempted=4.9e-3)  # the OS ran something else meanwhile
    s = stats.summary()
    assert abs(s["mask_wait_ms_max"] - 5.0) < 1e-9
    assert abs(s["mask_wait_ms_max_not_preempted"] - 0.1) < 1e-9


def test_a_steps_grammar_time_less_the_oss_preemption_of_its_masks_and_advances() -> None:
    stats = MaskWaitStats()
    stats.record(0.004, 0, preempted=0.003)  # masks: 1 ms its own
    stats.advanced(0.002, preempted=0.0015)  # an advance: 0.5 ms its own
    stats.deferred(0.0001)
    stats.close_step()
    stats.advanced(0.001, preempted=0.005)  # never more than the advance took
    stats.close_step()
    s = stats.summary()
    assert s["grammar_step_ms_max"] == pytest.approx(6.1) and s["grammar_steps"] == 2
    assert list(stats.grammar_step_seconds_not_preempted) == pytest.approx([0.0016, 0.0])
    assert s["grammar_step_ms_max_not_preempted"] == pytest.approx(1.6)


def test_the_run_queue_clock_never_goes_back() -> None:
    clock = RunQueueClock()
    first = clock.seconds()
    assert 0.0 <= first <= clock.seconds()


def test_the_gates_wait_and_the_fill_loop_are_reported_apart() -> None:
    stats = MaskWaitStats()
    stats.record(1.2e-3, cold=0, gate=0.9e-3)  # 0.9 ms in the gate, 0.3 ms filling
    stats.record(0.1e-3, cold=0)  # all masks ready: the fill loop alone
    s = stats.summary()
    assert abs(s["mask_gate_ms_max"] - 0.9) < 1e-9 and abs(s["mask_wait_ms_max"] - 1.2) < 1e-9
    assert abs(s["mask_fill_ms_p99"] - 0.3) < 1e-9 and abs(s["mask_fill_ms_p50"] - 0.3) < 1e-9


def test_garbage_collections_inside_a_step_are_kept_in_it_and_counted_apart() -> None:
    stats = MaskWaitStats()
    stats.record(12e-3, cold=0, gc_paused=11e-3)  # a collection stopped the step
    stats.record(0.1e-3, cold=0)
    s = stats.summary()
    assert abs(s["mask_wait_ms_max"] - 12.0) < 1e-9, "the collection stays in the step's time"
    assert s["mask_wait_steps_with_gc"] == 1 and abs(s["mask_wait_gc_ms_max"] - 11.0) < 1e-9


def test_the_run_queue_clock_reads_what_os_pread_reads() -> None:
    clock = RunQueueClock()
    if clock.seconds() == 0.0 and clock._fd is None:
        pytest.skip("no /proc/thread-self/schedstat on this system")
    # the GIL-holding read and os.pread see the same file: run_delay only grows between them
    ours = clock.seconds()
    theirs = int(os.pread(clock._fd, 128, 0).split()[1]) / 1e9
    assert 0.0 <= ours <= theirs <= clock.seconds()
