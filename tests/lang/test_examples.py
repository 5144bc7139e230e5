"""Every example runs end to end (on the untrained test model: the outputs are noise, the
programs must still run and print)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
CONSTRAINED = {"regex_fields", "json_extraction"}


@pytest.mark.parametrize("name", sorted(p.stem for p in EXAMPLES.glob("*.py")
                                        if not p.name.startswith("_")))
def test_example_runs(engine, constrained_decoding, name, capsys, monkeypatch):
    if name in CONSTRAINED and not constrained_decoding:
        pytest.skip("the engine reports constrained decoding is not available in this build")
    monkeypatch.syspath_prepend(str(EXAMPLES))
    module = importlib.import_module(name)
    try:
        module.main(engine)
    finally:
        sys.modules.pop(name, None)
    assert capsys.readouterr().out.strip(), f"{name} printed nothing"
