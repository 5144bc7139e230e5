"""Shared pieces of the language tests: a scripted backend (no model) and one engine per
module for the end-to-end tests."""

from __future__ import annotations

import pytest

from radixlm.testing.scripted_backend import ScriptedBackend


@pytest.fixture
def scripted() -> ScriptedBackend:
    return ScriptedBackend()


@pytest.fixture(scope="module")
def engine(tiny_llama_path):
    """One engine per test module (startup takes a few seconds)."""
    from radixlm.runtime.api.engine import Engine

    eng = Engine(model_path=str(tiny_llama_path))
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def constrained_decoding(engine) -> bool:
    """Whether the engine serves regex/JSON constraints (False only when it says so)."""
    try:
        engine.generate("x", {"regex": "[0-9]", "max_new_tokens": 1})
    except Exception as exc:  # noqa: BLE001 - only "not available" counts as absent
        if "not available" in str(exc):
            return False
        raise
    return True
