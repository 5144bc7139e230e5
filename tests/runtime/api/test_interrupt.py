"""Ctrl-C (SIGINT) stops a program holding an Engine, and the engine's children, promptly,
whichever of the program's threads the kernel hands the signal to."""

from __future__ import annotations

import concurrent.futures
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from radixlm.runtime.api.engine import wait_interruptibly

# x 0.1 s: the whole process tree must be gone within these polls. Engine.shutdown itself
# allows 5 s for the close, then 5 s for each process group to stop on SIGTERM before a
# kill: 5 s of polls (the old figure) failed once in a full CI run (2026-12-02).
POLLS = 200
PROGRAM = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's post-mortem, on failure
# Ctrl-C as a terminal's program has it: a process started with SIGINT ignored (as POSIX
# shells start a background job's commands, e.g. `bash .ci/run &`) keeps it ignored, and
# Python then installs no KeyboardInterrupt handler at all
signal.signal(signal.SIGINT, signal.default_int_handler)
from radixlm.runtime.api.engine import Engine
with Engine(model_path=sys.argv[1]) as engine:
    engine.generate("x", {"max_new_tokens": 2})
    print("ready", flush=True)
    while True:
        engine.generate("hello", {"max_new_tokens": 8})
"""


def children(pid: int) -> set[int]:
    """Direct children of ``pid`` (Linux /proc)."""
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found |= {int(c) for c in (task / "children").read_text().split()}
        except OSError:
            pass
    return found


def stacks_of(proc: subprocess.Popen) -> str:
    """Every thread's stack of a program that outlived its polls (its faulthandler on
    SIGUSR1), with the rest of its stderr: what the failure message needs to be acted on."""
    proc.send_signal(signal.SIGUSR1)
    time.sleep(1.0)
    proc.kill()
    _, err = proc.communicate(timeout=10)
    return err[-6000:]


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has exited


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc")
def test_sigint_stops_the_program_and_its_engine_children(tiny_llama_path):
    proc = subprocess.Popen([sys.executable, "-c", PROGRAM, str(tiny_llama_path)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
        kids = children(proc.pid)
        assert len(kids) >= 2, "the scheduler and the detokenizer run in children"
        proc.send_signal(signal.SIGINT)
        for _ in range(POLLS):
            if proc.poll() is not None and not any(alive(k) for k in kids):
                break
            time.sleep(0.1)
        if proc.poll() is None:
            pytest.fail(f"the program survived Ctrl-C; its threads:\n{stacks_of(proc)}")
        assert not [k for k in kids if alive(k)], "engine children survived Ctrl-C"
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


class Interrupted(Exception):
    pass


def signal_once_waited_on(future: concurrent.futures.Future, signalled: list[bool]) -> None:
    """Once a caller sleeps in ``future``'s condition (CPython's Condition keeps its sleepers
    in ``_waiters``), SIGUSR2 to this thread itself (noted in ``signalled`` first)."""
    while not future._condition._waiters:  # noqa: SLF001 - the only sign of a sleeper
        time.sleep(0.01)
    signalled.append(True)
    signal.pthread_kill(threading.get_ident(), signal.SIGUSR2)


def test_a_signal_caught_by_another_thread_still_interrupts_the_waiting_caller():
    """The C handler runs in whichever thread the kernel picked (here a worker that signals
    itself); the caller waiting on a call that never finishes runs the Python handler at its
    next wake instead of sleeping until the call returns (a plain ``future.result()`` runs it
    only then). A fail-safe finishes the future after 60 s, so a broken wait fails the test
    instead of hanging CI."""
    future: concurrent.futures.Future = concurrent.futures.Future()

    def interrupt(*_: object) -> None:
        raise Interrupted

    previous = signal.signal(signal.SIGUSR2, interrupt)
    fired: list[bool] = []
    signalled: list[bool] = []

    def finish() -> None:
        fired.append(True)
        future.set_result("not interrupted")
    fail_safe = threading.Timer(60.0, finish)
    try:
        fail_safe.start()
        worker = threading.Thread(target=signal_once_waited_on, args=(future, signalled),
                                  daemon=True)
        with pytest.raises(Interrupted):
            worker.start()
            wait_interruptibly(future, None)
        assert signalled, "the handler must run in the wait, not before it"
        assert not fired, "the handler ran only once the call returned (the fail-safe's)"
    finally:
        fail_safe.cancel()
        signal.signal(signal.SIGUSR2, previous)


def test_the_wait_keeps_the_results_and_the_errors_of_the_call():
    done: concurrent.futures.Future = concurrent.futures.Future()
    done.set_result(7)
    assert wait_interruptibly(done, None) == 7
    failed: concurrent.futures.Future = concurrent.futures.Future()
    failed.set_exception(TimeoutError("the call's own"))
    with pytest.raises(TimeoutError, match="the call's own"):
        wait_interruptibly(failed, None)
    with pytest.raises(TimeoutError):  # the caller's deadline, on a call that never ends
        wait_interruptibly(concurrent.futures.Future(), 0.25)
