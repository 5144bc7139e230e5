"""Checkpoint folders that cannot be run are refused with an error naming the problem."""

from __future__ import annotations

import shutil

import pytest
import torch

from radixlm.runtime.model.model_config import ModelConfig, UnsupportedModelError
from radixlm.runtime.model.model_runner import ModelRunner
from radixlm.runtime.model.models.rope import inv_frequencies
from radixlm.testing.config_variants import with_config as copy_with_config

BASE = dict(architectures=["LlamaForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, vocab_size=100)


def test_reads_both_rope_spellings():
    base = BASE
    v4 = ModelConfig.from_dict({**base, "rope_theta": 500000.0,
                                "rope_scaling": {"type": "linear", "factor": 2.0}})
    v5 = ModelConfig.from_dict({**base, "rope_parameters": {"rope_theta": 500000.0,
                                                            "rope_type": "linear",
                                                            "factor": 2.0}})
    assert v4.rope == v5.rope
    assert v4.rope.theta == 500000.0 and v4.rope.rope_type == "linear"
    assert v4.num_kv_heads == 4 and v4.head_dim == 16


def test_qwen2_has_qkv_bias_and_mistral_window():
    base = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
    qwen = ModelConfig.from_dict({**base, "architectures": ["Qwen2ForCausalLM"]})
    assert qwen.qkv_bias and not qwen.o_bias and qwen.sliding_windows == (0, 0)
    mistral = ModelConfig.from_dict({**base, "architectures": ["MistralForCausalLM"],
                                     "sliding_window": 4096})
    assert mistral.sliding_windows == (4096, 4096)


def test_folder_without_config_is_refused(tmp_path):
    with pytest.raises(UnsupportedModelError, match="config.json is missing"):
        ModelRunner(tmp_path)


def test_missing_directory_is_refused(tmp_path):
    with pytest.raises(UnsupportedModelError, match="is not a directory"):
        ModelRunner(tmp_path / "nope")


def test_unknown_architecture_is_refused(tiny_llama_path, tmp_path):
    bad = copy_with_config(tiny_llama_path, tmp_path / "m", architectures=["GPT2LMHeadModel"],
                           model_type="gpt2")
    with pytest.raises(UnsupportedModelError, match="unsupported architecture.*GPT2LMHeadModel"):
        ModelRunner(bad)


def test_unsupported_rope_type_is_refused(tiny_llama_path, tmp_path):
    bad = copy_with_config(tiny_llama_path, tmp_path / "m",
                           rope_parameters={"rope_type": "yarn", "rope_theta": 1e4})
    with pytest.raises(UnsupportedModelError, match="rope type 'yarn' is not supported"):
        ModelRunner(bad)


def test_missing_weights_are_refused(tiny_llama_path, tmp_path):
    dst = tmp_path / "m"
    shutil.copytree(tiny_llama_path, dst)
    (dst / "model.safetensors").unlink()
    with pytest.raises(UnsupportedModelError, match="no \\*.safetensors weights"):
        ModelRunner(dst)


def test_wrong_shapes_are_refused(tiny_llama_path, tmp_path):
    bad = copy_with_config(tiny_llama_path, tmp_path / "m", intermediate_size=200)
    with pytest.raises(UnsupportedModelError, match="expected shape"):
        ModelRunner(bad)


def test_gguf_rope_freq_factors_divide_the_frequencies():
    """A GGUF's rope_freqs (GGUFCheckpoint.hf_config's ``rope_freq_factors``): one divisor per
    rotary frequency, after the rope type's own scaling; a wrong count is refused."""
    factors = [1.0, 1.5, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0]  # head_dim 16: 8 frequencies
    cfg = ModelConfig.from_dict({**BASE, "rope_freq_factors": factors})
    plain = inv_frequencies(ModelConfig.from_dict(BASE).rope, 16)
    torch.testing.assert_close(inv_frequencies(cfg.rope, 16), plain / torch.tensor(factors))
    with pytest.raises(UnsupportedModelError, match="freq_factors has 3 entries"):
        ModelConfig.from_dict({**BASE, "rope_freq_factors": factors[:3]})
