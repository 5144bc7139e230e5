"""Qwen3 (QK-norm, explicit head_dim): config and loading (its exactness against transformers:
the Engine's in test_engine_exactness.py, the ModelRunner's in test_model_runner.py)."""

from __future__ import annotations

import shutil

import pytest
from safetensors.torch import load_file, save_file

from radixlm.runtime.model.model_config import ModelConfig, UnsupportedModelError
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.models import Qwen3ForCausalLM

BASE = dict(architectures=["Qwen3ForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=32,
            vocab_size=100)


def test_config_keeps_explicit_head_dim_and_no_qkv_bias():
    cfg = ModelConfig.from_dict(BASE)
    assert cfg.model_type == "qwen3" and cfg.head_dim == 32 != cfg.hidden_size // cfg.num_heads
    assert not cfg.qkv_bias and not cfg.o_bias and cfg.rotary_dim == 32
    assert cfg.sliding_windows == (0,) * 4
    windowed = ModelConfig.from_dict({**BASE, "use_sliding_window": True, "sliding_window": 8,
                                      "max_window_layers": 2})
    assert windowed.sliding_windows == (0, 0, 8, 8)


def test_runner_builds_qwen3_with_qk_norm(tiny_qwen3_path):
    runner = ModelRunner(tiny_qwen3_path, RunnerConfig(max_total_tokens=64))
    assert type(runner.model) is Qwen3ForCausalLM
    attn = runner.model.layers[0].self_attn
    assert attn.q_norm.shape == attn.k_norm.shape == (32,)
    assert runner.kv_pool.k_buffers[0].shape[-1] == 32


def test_checkpoint_without_qk_norm_is_refused(tiny_qwen3_path, tmp_path):
    dst = tmp_path / "m"
    shutil.copytree(tiny_qwen3_path, dst)
    tensors = load_file(dst / "model.safetensors")
    save_file({k: v for k, v in tensors.items() if "q_norm" not in k},
              dst / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(UnsupportedModelError, match="missing tensors.*q_norm"):
        ModelRunner(dst, RunnerConfig(max_total_tokens=64))
