"""Quantized modes keep the real model's quality: perplexity on a held-out text within 1%
(int8, and gguf: the file's own Q4_1 bits) and 5% (int4 groups of 32) of float32 on the same
weights (the Q4_1 file dequantized). Note that int4 g32 requantizes weights that already are
Q4_1 values, so it is close to lossless here; int8 is the harder test on this file."""

from __future__ import annotations

import math

import pytest
import torch

from radixlm.kernels.cpu.int8_amx import int8_amx_available
from radixlm.kernels.cpu.int8_gemv import int8_gemv_available
from radixlm.kernels.cpu.int8_onednn import onednn_int8_available
from radixlm.kernels.cpu.q4_gemv import q4_gemv_available, q4_gemv_unavailable_reason
from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig

TEXT = ("The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a can "
        "of oil and a cloth for the lens. Ships passing the rocky point relied on the beam to "
        "find the channel, and on foggy nights he also rang a bell every few minutes.")
BOUND = {"int8": 0.01, "gguf": 0.01, "int4": 0.05}


def text_logits(real_model, quantization: str | None) -> tuple[list[int], torch.Tensor]:
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(real_model.folder)(TEXT)["input_ids"]
    source = real_model.gguf if quantization == "gguf" else real_model.folder
    # The quantized kernel on every quantized linear (the batch-1 decode path: oneDNN's for
    # int8 where offered, else torch's, whose halves' outputs round to bfloat16): measured
    # choices would make the numerics load-dependent.
    gemm = "auto" if quantization is None else "quantized"
    runner = ModelRunner(source, RunnerConfig(max_total_tokens=256, quantization=quantization,
                                              cpu_gemm=gemm))
    if quantization == "gguf":  # every projection on the file's Q4_1 bits, its Q8_0 head too
        assert runner.linear_kinds == {"gguf-Q4_1": 4 * 30, "gguf-Q8_0": 1}
    slots, _ = runner.allocator.extend_slots([], len(ids), True)
    return ids, runner.forward([SeqSpec(ids, slots, logits_start=0)])


def perplexity(real_model, quantization: str | None) -> float:
    ids, logits = text_logits(real_model, quantization)
    logp = torch.log_softmax(logits[:-1], -1).gather(1, torch.tensor(ids[1:])[:, None])
    return math.exp(-logp.mean().item())


@pytest.fixture(scope="module")
def float32_ppl(real_model) -> float:
    return perplexity(real_model, None)


NATIVE = ("int4-vnni", "q8_0-vnni")  # the VNNI GEMV for int4 groups and a Q8_0 head


@pytest.mark.parametrize(("quantization", "kernel"), [
    ("int8", "int8-onednn"), ("int8", "int8-avx512"), ("int8", "int8-vnni"),
    ("int8", "int8-amx"), ("int8", "int8"),
    ("int4", None), ("gguf", None), ("int4", "int4-vnni"), ("gguf", "int4-vnni")])
def test_perplexity_stays_close_to_float32(real_model, float32_ppl, quantization, kernel,
                                           monkeypatch):
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))
    if kernel == "int8-onednn" and not onednn_int8_available():
        pytest.skip("this torch build lacks oneDNN's quantized linear ops")
    if kernel == "int8-avx512" and not int8_gemv_available():
        pytest.skip("the native int8 GEMV is not built, or this CPU lacks AVX-512")
    if kernel == "int8-amx" and not int8_amx_available():
        pytest.skip("int8-amx: the native module is not built, or this CPU lacks AMX-INT8")
    if kernel in ("int4-vnni", "int8-vnni") and not q4_gemv_available():
        pytest.skip(f"{kernel}: {q4_gemv_unavailable_reason()}")
    if kernel is not None:  # this int8 kernel first where the fixed choice looks
        monkeypatch.setattr(gemm_choice, "QUANTIZED_KERNELS",
                            (kernel, *(k for k in gemm_choice.QUANTIZED_KERNELS if k != kernel)))
    if kernel == "int4-vnni":  # the Q8_0 head (gguf) on the native kernel too
        monkeypatch.setattr(gemm_choice, "QUANTIZED_KERNELS",
                            (*NATIVE, *gemm_choice.QUANTIZED_KERNELS))
    ppl = perplexity(real_model, quantization)
    assert abs(ppl / float32_ppl - 1) <= BOUND[quantization], (quantization, ppl, float32_ppl)


def test_gguf_on_its_own_blocks_stays_near_the_float32_logits(real_model, monkeypatch):
    """On the file's own Q4_1 and Q8_0 blocks the activations are quantized to int8 per block,
    as llama.cpp does (``kernels/cpu/gguf_blocks.py``; same greedy tokens as llama.cpp,
    ``test_gguf_real_model.py``), so the logits are not float32's: measured within 5% of the
    logit scale here; perplexity within 1% (above). Float32-faithful numbers: ``quantization
    none``."""
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))
    _, ref = text_logits(real_model, None)
    _, got = text_logits(real_model, "gguf")
    torch.testing.assert_close(got, ref, rtol=0, atol=0.05 * ref.abs().max().item())
