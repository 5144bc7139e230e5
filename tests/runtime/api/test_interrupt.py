"""Ctrl-C (SIGINT) stops a program holding an Engine, and the engine's children, promptly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

# x 0.1 s: the whole process tree must be gone within these polls. Engine.shutdown itself
# allows 5 s for the close, then 5 s for each process group to stop on SIGTERM before a
# kill: 5 s of polls (the old figure) failed once in a full CI run (2026-12-02).
POLLS = 200
PROGRAM = """
import faulthandler, signal, sys, time
faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's post-mortem, on failure
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
