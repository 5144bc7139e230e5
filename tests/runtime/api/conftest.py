"""Starting a live ``radixlm serve`` process for HTTP tests."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from radixlm.router.dp_server import stop_processes

START_POLLS = 1200  # x 0.3 s between /health polls while the model loads


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass(frozen=True)
class LiveServer:
    """A started ``radixlm serve``: its base URL, its process and its log file."""

    url: str
    proc: subprocess.Popen
    log: Path


@pytest.fixture(scope="module")
def start_live_server(tmp_path_factory: pytest.TempPathFactory
                      ) -> Iterator[Callable[..., LiveServer]]:
    """``start_live_server(*flags, env=None)`` -> :class:`LiveServer` once ``/health`` answers;
    every server stops with the module."""
    procs: list[subprocess.Popen] = []

    def start(*flags: str, env: dict[str, str] | None = None) -> LiveServer:
        port = free_port()
        log: Path = tmp_path_factory.mktemp("server") / "server.log"
        cmd = [sys.executable, "-m", "radixlm.launch_server", *flags, "--port", str(port)]
        with open(log, "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                    env={**os.environ, **(env or {})})
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        for _ in range(START_POLLS):
            if proc.poll() is not None:
                pytest.fail(f"server exited: {log.read_text()[-3000:]}")
            try:
                if requests.get(f"{url}/health", timeout=1).ok:
                    return LiveServer(url, proc, log)
            except requests.ConnectionError:
                pass
            time.sleep(0.3)
        pytest.fail("server did not start")

    yield start
    stop_processes(procs, 20)


@pytest.fixture(scope="module")
def start_server(start_live_server: Callable[..., LiveServer]) -> Callable[..., str]:
    """``start_server(*flags, env=None)`` -> base URL; every server stops with the module.
    ``start_server.logs[url]`` is the server's log file (stdout and stderr)."""
    logs: dict[str, Path] = {}

    def start(*flags: str, env: dict[str, str] | None = None) -> str:
        server = start_live_server(*flags, env=env)
        logs[server.url] = server.log
        return server.url

    start.logs = logs  # type: ignore[attr-defined]
    return start
