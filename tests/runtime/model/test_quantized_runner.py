"""``--quantization int8 | int4`` through the model runner and the Engine on the tiny models.

Criterion (the tiny test models are untrained, so their logits are flat and small): prefill
logits within 3% (int8) / 25% (int4) of the float32 logit scale, and greedy generation runs
to its token budget. The quality bar on a real model (perplexity within 1% / 5%) is tested in
``test_quantized_real_model.py``.
"""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.int8_amx import int8_amx_available
from radixlm.kernels.cpu.int8_gemv import int8_gemv_available
from radixlm.kernels.cpu.int8_onednn import onednn_int8_available
from radixlm.kernels.cpu.q4_gemv import q4_gemv_available
from radixlm.runtime.model import gemm_choice
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.gemm_choice import ChosenLinear
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate

IDS = list(range(5, 45))
REL_TOL = {"int8": 0.03, "int4": 0.25}


def prefill_logits(runner: ModelRunner) -> torch.Tensor:
    slots, _ = runner.allocator.extend_slots([], len(IDS), True)
    return runner.forward([SeqSpec(IDS, slots, logits_start=0)])


@pytest.mark.parametrize("quantization", ["int8", "int4"])
def test_quantized_logits_track_float32(tiny_model_path, quantization):
    ref = prefill_logits(ModelRunner(tiny_model_path, RunnerConfig(max_total_tokens=256)))
    runner = ModelRunner(tiny_model_path, RunnerConfig(max_total_tokens=256,
                                                       quantization=quantization))
    assert any(kind.startswith(quantization) for kind in runner.linear_kinds)
    got = prefill_logits(runner)
    assert got.dtype == torch.float32 and got.shape == ref.shape
    rel = ((got - ref).abs().max() / ref.abs().max()).item()
    assert rel < REL_TOL[quantization], f"{quantization}: max error {rel:.3f} of logit scale"


INT8_KERNELS = [
    pytest.param("int8-onednn", marks=pytest.mark.skipif(
        not onednn_int8_available(), reason="torch lacks oneDNN's quantized linear")),
    pytest.param("int8-avx512", marks=pytest.mark.skipif(
        not int8_gemv_available(), reason="the native int8 GEMV is not built, or this CPU "
        "lacks AVX-512 (python setup.py build_ext --inplace)")),
    pytest.param("int8-vnni", marks=pytest.mark.skipif(
        not q4_gemv_available(), reason="the native VNNI GEMV is not built, or this CPU lacks "
        "AVX-512 VNNI (python setup.py build_ext --inplace)")),
    pytest.param("int8-amx", marks=pytest.mark.skipif(
        not int8_amx_available(), reason="the native AMX GEMM is not built, or this CPU lacks "
        "AMX-INT8 (python setup.py build_ext --inplace)")),
]


@pytest.mark.parametrize("kernel", INT8_KERNELS)
def test_int8_kernel_keeps_the_int8_weights_numerics(tiny_model_path, monkeypatch, kernel):
    """Fixed to the weight-only kernel (oneDNN's u8 x s8 GEMM by default, or a native GEMV
    put first), int8 runs it on every linear that offers it, and its logits equal those of the
    dequantized int8 weights in float32 (``int8-dequant``) to float32 rounding: the
    activations lose nothing that matters (a 40-token prefill: the GEMV in chunks of 8)."""
    def runner() -> ModelRunner:
        return ModelRunner(tiny_model_path, RunnerConfig(max_total_tokens=256,
                                                         quantization="int8", cpu_gemm="quantized"))
    monkeypatch.setattr(gemm_choice, "QUANTIZED_KERNELS",
                        (kernel, *(k for k in gemm_choice.QUANTIZED_KERNELS if k != kernel)))
    fixed = runner()
    linears = [m for m in fixed.model.modules() if isinstance(m, ChosenLinear)]
    # int8-vnni takes whole groups of 32 inputs only (the tiny llama's 176 is not)
    offered = [m for m in linears if kernel != "int8-vnni" or m.in_features % 32 == 0]
    assert offered and {m.plan.used for m in offered} == {frozenset({kernel})}
    # the reference: the same weights dequantized to float32 on every linear
    monkeypatch.setattr(gemm_choice, "QUANTIZED_KERNELS", ("int8-dequant",))
    got, ref = prefill_logits(fixed), prefill_logits(runner())
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-4 * ref.abs().max().item())


def test_int4_keeps_a_linear_float_when_its_input_is_not_whole_groups(tiny_llama_path):
    # tiny llama: intermediate 176 = 5.5 groups of 32, so down_proj stays float32; head int8
    runner = ModelRunner(tiny_llama_path, RunnerConfig(max_total_tokens=256, quantization="int4"))
    assert runner.linear_kinds == {"int4-g32": 6, "int8": 1, "float-torch.float32": 2}


@pytest.mark.parametrize("group", [32, 64])
def test_greedy_generation_runs_quantized(tiny_qwen2_path, group):
    runner = ModelRunner(tiny_qwen2_path, RunnerConfig(
        page_size=16, max_total_tokens=512, quantization="int4", quantization_group_size=group))
    out = greedy_generate(runner, [IDS[:7], IDS[3:20]], 12)
    assert [len(o) for o in out] == [12, 12]
    assert runner.allocator.num_free_pages == runner.allocator.num_pages


def test_engine_generates_with_int8(make_engine, tiny_llama_path):
    engine = make_engine(tiny_llama_path, quantization="int8")
    out = engine.generate(input_ids=[IDS[:9]], sampling_params={"max_new_tokens": 8,
                                                                "temperature": 0})
    assert len(out[0]["output_ids"]) == 8


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"quantization": "int3"}, "quantization must be one of"),
    ({"quantization": "int4", "quantization_group_size": 48}, "quantization_group_size"),
    ({"quantization": "int8", "device": "cuda"}, "runs on CPU only"),
])
def test_bad_quantization_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        RunnerConfig(**kwargs)


def test_gguf_quantization_needs_a_gguf(tiny_llama_path):
    with pytest.raises(ValueError, match="is not a GGUF"):
        ModelRunner(tiny_llama_path, RunnerConfig(max_total_tokens=64, quantization="gguf"))
