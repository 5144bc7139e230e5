"""``--kv-cache-dtype bfloat16`` halves the CPU pool and gives exactly the logits of float32
attention over K/V rounded to bfloat16 (prefill, then decode steps of several requests with
the rows of the batch mixed), on the tiny models; the setting's spellings are checked."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.server_args import ServerArgs

PROMPTS = [[5, 9, 13, 2, 7, 11], [5, 9, 13, 40], [3]]


def rounding_store(store):  # noqa: ANN001, ANN201 - a KernelOps.store_kv
    """``store`` with the new K/V rounded to bfloat16 first (the reference pool's values)."""
    def store_rounded(k_cache, v_cache, slots, k, v):  # noqa: ANN001, ANN202
        rnd = [t.to(torch.bfloat16).to(t.dtype) for t in (k, v)]
        return store(k_cache, v_cache, slots, *rnd)
    return store_rounded


def step_logits(runner: ModelRunner, steps: int = 3) -> list[torch.Tensor]:
    """Logits of a prefill of :data:`PROMPTS`, then ``steps`` decode steps of all of them
    (the next ids fixed, not sampled: both runners see the same inputs)."""
    slots = [runner.allocator.extend_slots([], len(p), True)[0] for p in PROMPTS]
    out = [runner.forward([SeqSpec(p, s, logits_start=0) for p, s in zip(PROMPTS, slots)])]
    for step in range(steps):
        specs = []
        for i, s in enumerate(slots):
            s.extend(runner.allocator.extend_slots(s, 1, True)[0])
            specs.append(SeqSpec([17 + step + i], s))
        out.append(runner.forward(specs))
    return out


@pytest.mark.parametrize("model", ["tiny_llama_path", "tiny_qwen2_path"])
def test_a_bfloat16_pool_equals_attention_over_bfloat16_rounded_kv(model, request):
    path = request.getfixturevalue(model)
    cfg = RunnerConfig(max_total_tokens=128, cpu_gemm="torch")
    ref = ModelRunner(path, cfg)
    for layer in ref.model.layers:
        ops = layer.self_attn.ops
        layer.self_attn.ops = dataclasses.replace(ops, store_kv=rounding_store(ops.store_kv))
    got = ModelRunner(path, dataclasses.replace(cfg, kv_cache_dtype="bf16"))
    assert got.kv_pool.k_buffers[0].dtype == torch.bfloat16
    assert got.kv_pool.nbytes() * 2 == ref.kv_pool.nbytes()
    for a, b in zip(step_logits(got), step_logits(ref)):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_kv_cache_dtype_spellings():
    assert ServerArgs(model_path="m", kv_cache_dtype="bf16").kv_cache_dtype == "bf16"
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        ServerArgs(model_path="m", kv_cache_dtype="fp8_e5m2")
    with pytest.raises(ValueError, match="kv_cache_dtype"):
        RunnerConfig(kv_cache_dtype="half")


def test_the_pool_is_sized_at_the_kv_cache_dtype(tiny_llama_path):
    from radixlm.runtime.wire.runner_setup import pool_size

    def per_token(kv: str) -> int:
        args = ServerArgs(model_path=str(tiny_llama_path), kv_cache_dtype=kv)
        return pool_size(args, RunnerConfig(kv_cache_dtype=kv))[0].bytes_per_token

    assert per_token("bfloat16") * 2 == per_token("auto")
