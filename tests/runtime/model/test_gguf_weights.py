"""A GGUF runs mapped: its block weights are views of the file, its cache folder is small.

Small GGUFs written here (random block bytes of every block type, with small float16 scales,
llama q/k rows permuted as llama.cpp stores them, qwen2 with float q/k/v biases and an untied
Q6_K head) load with ``quantization="gguf"``: no safetensors in the cache, the block linears'
bytes lie in the process's mapping of the file, and the logits equal the same file's tensors
dequantized to float32 (``quantization=None``) within :data:`REL_TOL`.
"""

from __future__ import annotations

import functools
import json
import logging
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.gguf_conversion import ensure_converted, gguf_source
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.runner_setup import load_runner
from radixlm.testing.random_gguf import random_blocks

# max |mapped - float32| relative to the largest float32 logit: the block kernel's float32
# accumulation order (the stand-in dequantizes and calls F.linear: equal to rounding)
REL_TOL = 1e-4
NATIVE_REL_TOL = 0.1  # int8 activations per block; see the test below
HIDDEN, HEADS, KV_HEADS, INTER, VOCAB = 256, 4, 2, 512, 320  # K-quants: 256-column rows
Q = gguf.GGMLQuantizationType
# per layer: GGUF tensor -> type (mixed fusions; a float piece keeps its fusion float)
LAYER_TYPES = [
    {"attn_q": "Q4_K", "attn_k": "Q4_K", "attn_v": "Q6_K", "attn_output": "Q5_0",
     "ffn_gate": "Q4_0", "ffn_up": "Q4_1", "ffn_down": "Q6_K"},
    {"attn_q": "Q8_0", "attn_k": "Q8_0", "attn_v": "Q8_0", "attn_output": "Q4_K",
     "ffn_gate": "Q5_K", "ffn_up": "Q5_K", "ffn_down": "F32"},
]


def write_gguf(path: Path, arch: str) -> Path:
    """A two-layer ``arch`` GGUF (no tokenizer): llama tied to a Q8_0 embedding, qwen2 with
    q/k/v biases and an untied Q6_K ``output.weight``."""
    rng = np.random.default_rng(0)
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(len(LAYER_TYPES))
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(INTER)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(VOCAB)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    kv = KV_HEADS * HIDDEN // HEADS
    rows = {"attn_q": (HIDDEN, HIDDEN), "attn_k": (kv, HIDDEN), "attn_v": (kv, HIDDEN),
            "attn_output": (HIDDEN, HIDDEN), "ffn_gate": (INTER, HIDDEN),
            "ffn_up": (INTER, HIDDEN), "ffn_down": (HIDDEN, INTER)}

    def add(name: str, type_name: str, shape: tuple[int, ...]) -> None:
        if type_name == "F32":
            scale = 1.0 if len(shape) == 1 else 0.05
            w.add_tensor(name, (1 + scale * rng.standard_normal(shape)).astype(np.float32)
                         if len(shape) == 1 else
                         (scale * rng.standard_normal(shape)).astype(np.float32))
        else:
            w.add_tensor(name, random_blocks(type_name, *shape, rng),
                         raw_dtype=getattr(Q, type_name))

    add("token_embd.weight", "Q8_0", (VOCAB, HIDDEN))
    add("output_norm.weight", "F32", (HIDDEN,))
    if arch == "qwen2":
        add("output.weight", "Q6_K", (VOCAB, HIDDEN))
    for i, types in enumerate(LAYER_TYPES):
        add(f"blk.{i}.attn_norm.weight", "F32", (HIDDEN,))
        add(f"blk.{i}.ffn_norm.weight", "F32", (HIDDEN,))
        for name, type_name in types.items():
            add(f"blk.{i}.{name}.weight", type_name, rows[name])
            if arch == "qwen2" and name in ("attn_q", "attn_k", "attn_v"):
                add(f"blk.{i}.{name}.bias", "F32", (rows[name][0],))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module", params=["llama", "qwen2"])
def mapped(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """(the GGUF, its cache folder)."""
    tmp = tmp_path_factory.mktemp(f"mapped-{request.param}")
    path = write_gguf(tmp / "m.gguf", request.param)
    return path, ensure_converted(path, tmp / "cache", need_tokenizer=False)


def prefill_logits(runner: ModelRunner) -> torch.Tensor:
    ids = [3, 17, 250, 9, 101, 64, 5, 300, 42, 7]
    slots, _ = runner.allocator.extend_slots([], len(ids), True)
    return runner.forward([SeqSpec(ids, slots, logits_start=0)])


def file_mappings(path: Path) -> list[tuple[int, int]]:
    """Address ranges of this process's mappings of ``path`` (/proc/self/maps)."""
    out = []
    for line in Path("/proc/self/maps").read_text().splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) == 6 and Path(parts[5]) == path.resolve():
            lo, hi = (int(a, 16) for a in parts[0].split("-"))
            out.append((lo, hi))
    return out


def test_the_cache_folder_holds_config_and_source_only(mapped):
    path, folder = mapped
    assert sorted(f.name for f in folder.iterdir()) == ["config.json", "gguf_source.json"]
    assert not list(folder.glob("*.safetensors"))
    assert sum(f.stat().st_size for f in folder.iterdir()) < 64 * 1024
    assert gguf_source(folder) == path.resolve()


@pytest.mark.parametrize("kernel", ["reference", "auto"])
def test_mapped_logits_equal_the_dequantized_float32_model(mapped, kernel, monkeypatch):
    """The mapping (names, fused pieces, llama's permuted q/k rows, biases, the tied head) is
    exact: with the block linears on their reference path (dequantize, ``F.linear``) the
    logits equal the float32 model's within REL_TOL. On the native path (``auto``) the
    activations are quantized to int8 per block (``kernels/cpu/gguf_blocks.py``: each linear
    within its tested bound, ``tests/kernels/cpu/test_gguf_blocks.py``), which through this
    random 2-layer model moved the logits by 1.2% (qwen2) and 3.6% (llama) of their scale:
    NATIVE_REL_TOL catches a wrong mapping or kernel (tens of percent), not the rounding. The
    real model's accuracy on its own bits is checked by perplexity and greedy tokens
    (``test_gguf_real_model.py``)."""
    from radixlm.runtime.model import gguf_weights

    monkeypatch.setattr(gguf_weights, "GGUFBlockLinear",
                        functools.partial(gguf_weights.GGUFBlockLinear, path=kernel))
    _, folder = mapped
    ref = prefill_logits(ModelRunner(folder, RunnerConfig(max_total_tokens=64,
                                                          cpu_gemm="torch")))
    runner = ModelRunner(folder, RunnerConfig(max_total_tokens=64, quantization="gguf",
                                              cpu_gemm="torch"))
    head = "gguf-Q6_K" if runner.model_config.model_type == "qwen2" else "gguf-Q8_0"
    expected = {"gguf-Q4_K+Q6_K": 1, "gguf-Q5_0": 1, "gguf-Q4_0+Q4_1": 1, "gguf-Q6_K": 1,
                "gguf-Q8_0": 1, "gguf-Q4_K": 1, "gguf-Q5_K": 1, "float-torch.float32": 1}
    expected[head] += 1
    assert runner.linear_kinds == expected
    got = prefill_logits(runner)
    assert ref.abs().max() > 0.1 and torch.isfinite(ref).all()
    tol = REL_TOL if kernel == "reference" else NATIVE_REL_TOL
    torch.testing.assert_close(got, ref, rtol=0, atol=tol * ref.abs().max().item())


def test_block_weights_are_views_of_the_files_mapping(mapped):
    path, folder = mapped
    runner = ModelRunner(folder, RunnerConfig(max_total_tokens=64, quantization="gguf"))
    ranges = file_mappings(path)
    assert ranges, "the GGUF is memory-mapped"
    raws = [p.raw for m in runner.gguf_blocks.modules.values() for p in m.pieces]
    assert len(raws) == 2 * 6 + 1 + 1  # q, k, v, o, gate, up (+ down in layer 0), head
    raws.append(runner.model.embed_tokens.raw)  # the Q8_0 table, read by rows
    for raw in raws:
        ptr = raw.data_ptr()
        assert any(lo <= ptr and ptr + raw.numel() <= hi for lo, hi in ranges)
    names = {n for n, _ in runner.model.named_parameters()}
    assert not any(part in n for n in names for part in ("qkv_proj", "gate_up_proj", "o_proj",
                                                          "embed_tokens", "lm_head"))


def test_a_float32_conversion_of_the_file_is_removed_and_old_folders_still_resolve(tmp_path):
    path = write_gguf(tmp_path / "m.gguf", "llama")
    old = tmp_path / "cache" / "m-0123456789abcdef"  # a version-1 folder of this file
    old.mkdir(parents=True)
    save_file({"x": torch.zeros(4)}, str(old / "model.safetensors"),
              metadata={"format": "pt", "source": str(path)})
    assert gguf_source(old) == path
    folder = ensure_converted(path, tmp_path / "cache", need_tokenizer=False)
    assert not old.exists() and folder.is_dir()


def test_default_quantization_of_a_gguf_and_the_start_up_line(mapped, caplog):
    _, folder = mapped
    args = ServerArgs(model_path=str(folder), num_threads=1, max_total_tokens=64)
    assert args.resolved_quantization[0] == "gguf"
    assert ServerArgs(model_path=str(folder), quantization="none").resolved_quantization[0] \
        is None
    assert ServerArgs(model_path=str(folder), tp_size=2, dist_init_addr="127.0.0.1:1"
                      ).resolved_quantization[0] is None
    with caplog.at_level(logging.INFO, logger="radixlm.runtime.wire.runner_setup"):
        runner, _, weights = load_runner(args)
    line = next(r.getMessage() for r in caplog.records if "KV pool" in r.getMessage())
    assert "weights as gguf blocks mapped from m.gguf (a GGUF runs on its own bits" in line
    assert weights == runner.gguf.resident_bytes(quantized=True)
    assert weights < runner.gguf.resident_bytes(quantized=False) / 2
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["num_hidden_layers"] == len(LAYER_TYPES)


# imported by the old load path: gguf's reader (and through it mistral_common), and
# torch._dynamo (nn.Embedding's init on the meta device): 20-200 s of a load under load
SLOW_IMPORTS = ("gguf", "mistral_common", "torch._dynamo", "transformers")


def test_loading_a_gguf_imports_neither_gguf_nor_dynamo(tmp_path):
    """A fresh process loads a (converted) GGUF on its own bits without the ``gguf`` package,
    torch._dynamo or transformers."""
    path = write_gguf(tmp_path / "m.gguf", "llama")
    folder = ensure_converted(path, tmp_path / "cache", need_tokenizer=False)
    code = ("import sys\n"
            "from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig\n"
            f"ModelRunner({str(folder)!r}, RunnerConfig(max_total_tokens=64, "
            "quantization='gguf'))\n"
            f"print([m for m in {SLOW_IMPORTS!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=600)
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout + out.stderr
