"""benchmarks/gpu/engine_8b.py: its pieces (8B shape, bench_serving's random lengths, KV pool
sizing) and its whole flow on a tiny config on CPU, as the device script runs it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _load():  # noqa: ANN202
    spec = importlib.util.spec_from_file_location(
        "engine_8b", ROOT / "benchmarks" / "gpu" / "engine_8b.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


e8b = _load()


def test_the_8b_shape_has_llama_31_8b_parameter_count() -> None:
    assert e8b.parameter_bytes(e8b.LLAMA_31_8B) == 2 * 8_030_261_248
    assert e8b.kv_bytes_per_token(e8b.LLAMA_31_8B) == 128 * 1024  # 32 layers x K,V x 8 x 128


def test_kv_pool_takes_the_fraction_minus_weights() -> None:
    assert e8b.kv_pool_tokens(1000, 0.5, 100, 8) == (500 - 100) // 8
    with pytest.raises(ValueError, match="no room for KV"):
        e8b.kv_pool_tokens(1000, 0.1, 100, 8)
    with pytest.raises(ValueError, match="mem_fraction_static"):
        e8b.kv_pool_tokens(1000, 1.5, 100, 8)


@pytest.mark.parametrize(("full", "ratio", "low"), [(1024, 0.5, 512), (1024, 0.0, 1),
                                                    (10, 1.0, 10), (7, 0.3, 2)])
def test_random_lengths_follow_bench_serving(full: int, ratio: float, low: int) -> None:
    lens = e8b.random_lengths(4000, full, ratio, torch.Generator().manual_seed(0))
    assert min(lens) >= low and max(lens) <= full
    if full - low >= 2:  # both ends of the inclusive range are drawn
        assert min(lens) == low and max(lens) == full


def test_checkpoint_loads_in_transformers(tmp_path: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = e8b.write_checkpoint(tmp_path / "m", e8b.TINY, torch.device("cpu"))
    model = AutoModelForCausalLM.from_pretrained(path)
    assert sum(p.numel() for p in model.parameters()) * 2 == e8b.parameter_bytes(e8b.TINY)
    tok = AutoTokenizer.from_pretrained(path)
    assert len(tok) == e8b.TINY["vocab_size"] and tok.decode([5, 511]) == "w5 w511"


@pytest.mark.skipif(shutil.which("bash") is None, reason="run_device.sh needs bash")
def test_run_device_tiny_dry_run_writes_one_json_with_every_section(tmp_path: Path) -> None:
    """run_device.sh --tiny: the device script's flow on CPU (engine_8b --tiny, the merge)."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    out = tmp_path / "out"
    proc = subprocess.run(["bash", str(ROOT / "benchmarks" / "gpu" / "run_device.sh"), str(out),
                           "--tiny"], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert sorted(p.name for p in out.iterdir()) == ["results.json", "run.log"]
    data = json.loads((out / "results.json").read_text())
    assert data["kernels_rc"] is None and data["engine_rc"] == 0 and not data["timed_out"]
    w = e8b.TINY_WORKLOAD
    sections = data["engine"]["sections"]
    expected = {"write_checkpoint", "random_page16", "rag_page16", "random_page1", "rag_page1",
                *(f"decode_b{b}" for b in w.decode_batches)}
    assert set(sections) == expected and all(s["ok"] for s in sections.values())
    _, outs = e8b.random_requests(w, e8b.TINY["vocab_size"], w.num_prompts)
    assert sections["random_page16"]["result"]["output_tokens"] == sum(outs)
    assert sections["random_page1"]["result"]["requests"] == w.page1_prompts
    rag = sections["rag_page1"]["result"]
    assert rag["output_tokens"] == w.rag_requests * w.rag_output_len
    assert rag["cache_hit_rate"] > 0  # the document is computed once
    for b in w.decode_batches:
        assert sections[f"decode_b{b}"]["result"]["decode_tok_s"] > 0
