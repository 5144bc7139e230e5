"""benchmarks/bench_common.py: what ``--model`` resolves to, the result-file defaults, and one
benchmark's whole flow on the test checkpoint (as a script, the way a user runs it)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _load():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location("bench_common",
                                                  ROOT / "benchmarks" / "bench_common.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it loads
    spec.loader.exec_module(module)
    return module


common = _load()


def test_a_checkpoint_folder_is_both_sides_path_and_counts_its_parameters(
        tiny_llama_path: Path) -> None:
    model = common.resolve_model(str(tiny_llama_path))
    assert model.path == model.hf_path == tiny_llama_path
    built = json.loads((tiny_llama_path / "radixlm_tiny.json").read_text())
    assert model.parameters == built["parameters"]


def test_smollm2_gives_radixlm_the_gguf_and_transformers_its_conversion(
        real_model, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: ANN001 - conftest type
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))
    model = common.resolve_model("smollm2")
    assert model.path == real_model.gguf
    assert model.hf_path == real_model.folder


def test_an_unknown_model_names_the_choices(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="smollm2, gemma3, tiny, small or a path"):
        common.resolve_model(str(tmp_path / "nowhere"))


def test_defaults_are_the_real_model_one_thread_and_results_folder() -> None:
    parser = argparse.ArgumentParser()
    common.add_common_args(parser, "some_bench")
    args = parser.parse_args([])
    assert (args.model, args.threads) == ("smollm2", 1)
    assert args.out == ROOT / "benchmarks" / "results" / "some_bench.json"
    gitignore = (ROOT / ".gitignore").read_text().splitlines()
    assert "benchmarks/results/" in gitignore


def test_median_time_calls_the_function_once_per_repeat() -> None:
    calls = []
    assert common.median_time(lambda: calls.append(1), 5) >= 0
    assert len(calls) == 5


def test_model_runner_script_runs_and_matches_transformers(tiny_llama_path: Path,
                                                           tmp_path: Path) -> None:
    out = tmp_path / "mr.json"
    cmd = [sys.executable, str(ROOT / "benchmarks" / "model_runner.py"), "--model",
           str(tiny_llama_path), "--repeats", "1", "--prefill-len", "16", "--prompt-len", "8",
           "--new-tokens", "3", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = json.loads(out.read_text())["results"][str(tiny_llama_path)]
    assert [r["phase"] for r in rows] == ["prefill 8x16", "decode batch 1", "decode batch 8",
                                         "decode batch 32"]
    assert [r["identical"] for r in rows[1:]] == ["1/1", "8/8", "32/32"]
