"""The clock of the scheduler's grammar advances: wall time, and of it the OS's preemption,
read from the run-queue clock once a step and after an advance that was off the CPU."""

from __future__ import annotations

import pytest

from radixlm.runtime.scheduling.advance_clock import AdvanceClock


class FakeRunQueue:
    def __init__(self) -> None:
        self.delay, self.reads = 0.0, 0

    def seconds(self) -> float:
        self.reads += 1
        return self.delay


def clocks() -> tuple[FakeRunQueue, dict[str, float], AdvanceClock]:
    queue, now = FakeRunQueue(), {"wall": 0.0, "cpu": 0.0}
    return queue, now, AdvanceClock(queue, lambda: now["wall"], lambda: now["cpu"])  # type: ignore[arg-type]


def test_an_advance_on_the_cpu_reads_the_run_queue_once_a_step_only() -> None:
    queue, now, clock = clocks()
    for _ in range(3):
        mark = clock.start()
        now["wall"] += 0.001
        now["cpu"] += 0.001
        assert clock.stop(mark) == (pytest.approx(0.001), 0.0)
    assert queue.reads == 1
    clock.new_step()
    clock.start()
    assert queue.reads == 2


def test_off_the_cpu_the_preemption_is_at_most_the_time_off_it() -> None:
    queue, now, clock = clocks()
    mark = clock.start()
    now["wall"] += 0.004  # 1 ms on the CPU, 3 ms off it: 2 ms runnable, 1 ms waiting (GIL)
    now["cpu"] += 0.001
    queue.delay += 0.002
    assert clock.stop(mark) == (pytest.approx(0.004), pytest.approx(0.002))
    mark = clock.start()
    now["wall"] += 0.002  # off the CPU 1 ms, but the run queue says 5 ms since the last read
    now["cpu"] += 0.001
    queue.delay += 0.005
    assert clock.stop(mark) == (pytest.approx(0.002), pytest.approx(0.001))
