"""Live HTTP processes for the router tests: ``radixlm serve`` workers, ``radixlm router``
and ``radixlm serve --dp-size``, each on a free loopback port, all stopped with the module."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from radixlm.router.dp_server import stop_processes
from radixlm.runtime.wire.ipc import free_tcp_port

START_POLLS = 2400  # x 0.3 s between /health polls while models load (a loaded machine)
STOP_TIMEOUT_S = 30


@dataclass(frozen=True)
class LiveProcess:
    """A started ``radixlm`` HTTP command: its base URL, process and log file."""

    url: str
    proc: subprocess.Popen
    log: Path


@pytest.fixture(scope="module")
def start_http(tmp_path_factory: pytest.TempPathFactory
               ) -> Iterator[Callable[..., LiveProcess]]:
    """``start_http(subcommand, *flags)`` -> :class:`LiveProcess` once ``/health`` answers
    200 (``wait=False``: as soon as it listens)."""
    procs: list[subprocess.Popen] = []

    def start(subcommand: str, *flags: str, wait: bool = True) -> LiveProcess:
        port = free_tcp_port()
        log = tmp_path_factory.mktemp(subcommand) / "out.log"
        cmd = [sys.executable, "-m", "radixlm.cli", subcommand, *flags, "--port", str(port)]
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    env=dict(os.environ))
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        for _ in range(START_POLLS):
            if proc.poll() is not None:
                pytest.fail(f"{subcommand} exited: {log.read_text()[-3000:]}")
            try:
                if requests.get(f"{url}/health", timeout=2).ok or not wait:
                    return LiveProcess(url, proc, log)
            except requests.ConnectionError:
                pass
            time.sleep(0.3)
        pytest.fail(f"{subcommand} did not start: {log.read_text()[-3000:]}")

    yield start
    stop_processes(procs, STOP_TIMEOUT_S)
