"""Quantized modes keep the real model's quality: perplexity on a held-out text within 1%
(int8, and gguf: the file's own Q4_1 bits, on each of its block paths) and 5% (int4 groups of
32) of float32 on the same weights (the Q4_1 file dequantized). Note that int4 g32 requantizes
weights that already are Q4_1 values, so it is close to lossless here; int8 is the harder test
on this file.

The text is long on purpose: 1,876 tokens of Newton's *Opticks* (1704, public domain; the
opening paragraphs of Query 31, ``perplexity_text_opticks.txt``). Int8 activations make the
model's output jump with the last bit of a linear's input, so on a short text the rounding
order alone moves perplexity by several percent: on the 52-token text this test used before,
one ulp on one linear's input moved it over 93.4-95.4 (float32: 94.68) and the GGUF block
paths, which differ only in float32 summation order, gave 94.09 (passes of 8), 96.54 (tiles)
and 96.06 (portable). On this text they give +0.49%, +0.79% and +0.88% of float32's 25.69."""

from __future__ import annotations

import functools
import math
from pathlib import Path

import pytest
import torch

from radixlm.kernels.cpu.gguf_blocks import GGUFBlockLinear, gguf_blocks_built, gguf_blocks_vnni
from radixlm.kernels.cpu.int8_amx import int8_amx_available
from radixlm.kernels.cpu.int8_gemv import int8_gemv_available
from radixlm.kernels.cpu.int8_onednn import onednn_int8_available
from radixlm.kernels.cpu.q4_gemv import q4_gemv_available, q4_gemv_unavailable_reason
from radixlm.runtime.model import gemm_choice, gguf_weights
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig

TEXT = (Path(__file__).parent / "perplexity_text_opticks.txt").read_text(encoding="utf-8")
# the logits test below: a short text, as before (its bound is on the largest logit error)
SHORT_TEXT = ("The lighthouse keeper climbed the spiral stairs every evening at dusk, carrying a "
              "can of oil and a cloth for the lens. Ships passing the rocky point relied on the "
              "beam to find the channel, and on foggy nights he also rang a bell every few "
              "minutes.")
BOUND = {"int8": 0.01, "gguf": 0.01, "int4": 0.05}


def text_logits(real_model, quantization: str | None,
                text: str = TEXT) -> tuple[list[int], torch.Tensor]:
    """The prefill logits of every position of ``text``, in one forward."""
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(real_model.folder)(text)["input_ids"]
    source = real_model.gguf if quantization == "gguf" else real_model.folder
    # The quantized kernel on every quantized linear (the batch-1 decode path: oneDNN's for
    # int8 where offered, else torch's, whose halves' outputs round to bfloat16): measured
    # choices would make the numerics load-dependent.
    gemm = "auto" if quantization is None else "quantized"
    runner = ModelRunner(source, RunnerConfig(max_total_tokens=len(ids) + 16,
                                              quantization=quantization, cpu_gemm=gemm))
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


# GGUFBlockLinear's arguments per path (the default, the passes of 8 on VNNI, runs above):
# the same int8 activations and integer sums, float32 sums in other orders
GGUF_PATHS = {"tiles": {"path": "vnni", "tiles": True},
              "portable": {"path": "portable", "tiles": False}}


@pytest.mark.parametrize("variant", sorted(GGUF_PATHS))
def test_each_gguf_block_path_stays_close_to_float32(real_model, float32_ppl, variant,
                                                     monkeypatch):
    """The file's own blocks on each native path, the portable one (CPUs without VNNI) too,
    within the same 1%."""
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))
    if not gguf_blocks_built() or (variant != "portable" and not gguf_blocks_vnni()):
        pytest.skip(f"{variant}: the native gguf_blocks module is not built, or this CPU lacks "
                    "AVX-512 VNNI")
    monkeypatch.setattr(gguf_weights, "GGUFBlockLinear",
                        functools.partial(GGUFBlockLinear, **GGUF_PATHS[variant]))
    ppl = perplexity(real_model, "gguf")
    assert abs(ppl / float32_ppl - 1) <= BOUND["gguf"], (variant, ppl, float32_ppl)


def test_gguf_on_its_own_blocks_stays_near_the_float32_logits(real_model, monkeypatch):
    """On the file's own Q4_1 and Q8_0 blocks the activations are quantized to int8 per block,
    as llama.cpp does (``kernels/cpu/gguf_blocks.py``; same greedy tokens as llama.cpp,
    ``test_gguf_real_model.py``), so the logits are not float32's: measured within 5% of the
    logit scale here; perplexity within 1% (above). Float32-faithful numbers: ``quantization
    none``."""
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))
    _, ref = text_logits(real_model, None, SHORT_TEXT)
    _, got = text_logits(real_model, "gguf", SHORT_TEXT)
    torch.testing.assert_close(got, ref, rtol=0, atol=0.05 * ref.abs().max().item())
