"""Starting live ``radixlm serve`` processes for HTTP tests (``start_http`` is the shared
launcher in ``tests/conftest.py``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="module")
def start_live_server(start_http: Callable[..., Any]) -> Callable[..., Any]:
    """``start_live_server(*flags, env=None)`` -> the started server (``url``, ``proc``,
    ``log``) once ``/health`` answers; every server stops with the module."""

    def start(*flags: str, env: dict[str, str] | None = None) -> Any:
        return start_http("serve", *flags, env=env)

    return start


@pytest.fixture(scope="module")
def start_server(start_live_server: Callable[..., Any]) -> Callable[..., str]:
    """``start_server(*flags, env=None)`` -> base URL; every server stops with the module.
    ``start_server.logs[url]`` is the server's log file (stdout and stderr)."""
    logs: dict[str, Path] = {}

    def start(*flags: str, env: dict[str, str] | None = None) -> str:
        server = start_live_server(*flags, env=env)
        logs[server.url] = server.log
        return server.url

    start.logs = logs  # type: ignore[attr-defined]
    return start
