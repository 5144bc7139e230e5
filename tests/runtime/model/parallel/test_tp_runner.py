"""TP=2 over gloo gives TP=1's logits (within 1e-4, float32) and greedy tokens, per model
(Qwen3's QK-norm weights are replicated on every rank; Phi-3's fused qkv_proj / gate_up_proj
are split block by block)."""

from __future__ import annotations

import functools

import pytest
import torch
from transformers import AutoTokenizer

from radixlm.runtime.model.model_config import ModelConfig
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.parallel.sharding import TPSharding
from radixlm.testing.parallel import prefill_logits_and_greedy, run_tensor_parallel

PROMPTS = ["The capital of France is", "Question: What is 3 plus 4?\nAnswer:", "x"]
TOL = 1e-4
NEW_TOKENS = 8


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3", "phi3"])
def test_tp2_matches_tp1(request, arch):
    tiny_model_path = request.getfixturevalue(f"tiny_{arch}_path")
    cfg = ModelConfig.from_folder(tiny_model_path)
    # the qwen2 test model has one KV head: replicated on both ranks
    assert TPSharding.create(cfg, 2, 1).kv_heads == ((0, 1) if cfg.num_kv_heads == 1 else (1, 2))
    tok = AutoTokenizer.from_pretrained(tiny_model_path)
    prompts = [tok(t).input_ids for t in PROMPTS]
    config = RunnerConfig(page_size=4, max_total_tokens=512)
    job = functools.partial(prefill_logits_and_greedy, prompts, NEW_TOKENS)
    ref_logits, ref_tokens = job(ModelRunner(tiny_model_path, config))
    tp_logits, tp_tokens = run_tensor_parallel(str(tiny_model_path), 2, job, config)
    assert tp_tokens == ref_tokens
    for ref, got in zip(ref_logits, tp_logits):
        assert ref.std() > 0.01, "degenerate reference logits would make the check vacuous"
        torch.testing.assert_close(got, ref, atol=TOL, rtol=0)
