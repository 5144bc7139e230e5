"""Every example runs end to end (on the untrained test model: the outputs are noise, the
programs must still run and print)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONSTRAINED = {"regex_fields", "json_extraction"}


def _constrained_decoding_available(engine) -> bool:
    try:
        engine.generate("x", {"regex": "[0-9]", "max_new_tokens": 1})
    except Exception as exc:  # noqa: BLE001 - only "not available" counts as absent
        if "not available" in str(exc):
            return False
        raise
    return True


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.py")
                                        if not p.name.startswith("_")))
def test_example_runs(engine, name, capsys, monkeypatch):
    if name in CONSTRAINED and not _constrained_decoding_available(engine):
        pytest.skip("the engine reports constrained decoding is not available in this build")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    module = importlib.import_module(name)
    try:
        module.main(engine)
    finally:
        sys.modules.pop(name, None)
    assert capsys.readouterr().out.strip(), f"{name} printed nothing"
