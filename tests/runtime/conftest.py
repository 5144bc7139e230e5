"""Engines shared by the runtime tests (each takes a few seconds to start)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from radixlm.runtime.api.engine import Engine


@pytest.fixture(scope="module")
def make_engine() -> Iterator[Callable[..., Engine]]:
    """Start engines on demand; all are shut down when the module's tests end."""
    engines: list[Engine] = []

    def start(model_path: Any, **server_args: Any) -> Engine:
        engine = Engine(model_path=str(model_path), **server_args)
        engines.append(engine)
        return engine

    yield start
    for engine in engines:
        engine.shutdown()

