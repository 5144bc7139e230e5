"""Gemma 3 (text): config in both transformers spellings, Gemma's norm, loading, and exactness
against transformers' Gemma3ForCausalLM through the Engine (cold and warm radix cache, page
sizes 1 and 16, prompts several windows long). The ModelRunner's exactness tests (prefill,
64 greedy tokens, a cached prefix longer than the window) run it too, in test_model_runner.py."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm

from radixlm.kernels import TORCH_OPS
from radixlm.runtime.model.forward_batch import SeqSpec
from radixlm.runtime.model.model_config import ModelConfig, RopeConfig, UnsupportedModelError
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.models import Gemma3ForCausalLM
from radixlm.runtime.model.models.gemma3 import gemma_rms_norm
from radixlm.testing.config_variants import with_config
from radixlm.testing.prefill_oracle import assert_runner_matches_hf

BASE = dict(architectures=["Gemma3ForCausalLM"], model_type="gemma3_text", hidden_size=64,
            intermediate_size=128, num_hidden_layers=7, num_attention_heads=4,
            num_key_value_heads=1, head_dim=32, vocab_size=100, sliding_window=8)
WINDOW = 8


def test_config_v4_spelling_and_gemma_defaults():
    cfg = ModelConfig.from_dict({**BASE, "rope_theta": 5e5, "rope_local_base_freq": 2e4,
                                 "rope_scaling": {"rope_type": "linear", "factor": 8.0},
                                 "sliding_window_pattern": 3})
    assert cfg.model_type == "gemma3_text" and cfg.tie_word_embeddings
    assert cfg.sliding_windows == (8, 8, 0, 8, 8, 0, 8)
    assert cfg.rope == RopeConfig(theta=5e5, rope_type="linear", factor=8.0)
    assert cfg.sliding_rope == RopeConfig(theta=2e4)
    assert cfg.attention_scale == 256**-0.5 and cfg.hidden_act == "gelu_pytorch_tanh"
    assert cfg.final_logit_softcap == 0.0
    plain = ModelConfig.from_dict(BASE)  # every 6th layer global, bases 1e6 and 1e4
    assert plain.sliding_windows == (8, 8, 8, 8, 8, 0, 8)
    assert plain.rope == RopeConfig(theta=1e6) and plain.sliding_rope == RopeConfig(theta=1e4)
    unwindowed = ModelConfig.from_dict({**BASE, "sliding_window": None})  # as transformers
    assert unwindowed.sliding_windows == (0,) * 7


def test_config_v5_spelling_and_multimodal_text_config():
    v5 = {**BASE, "query_pre_attn_scalar": 24, "layer_types": ["full_attention"] * 7,
          "rope_parameters": {"full_attention": {"rope_type": "default", "rope_theta": 3e5},
                              "sliding_attention": {"rope_type": "default", "rope_theta": 7e3}}}
    cfg = ModelConfig.from_dict(v5)
    assert cfg.sliding_windows == (0,) * 7 and cfg.attention_scale == 24**-0.5
    assert cfg.rope == RopeConfig(theta=3e5) and cfg.sliding_rope == RopeConfig(theta=7e3)
    outer = ModelConfig.from_dict({"architectures": ["Gemma3ForConditionalGeneration"],
                                   "model_type": "gemma3", "text_config": v5})
    assert outer == cfg


@pytest.mark.parametrize(("changes", "message"), [
    (dict(use_bidirectional_attention=True), "use_bidirectional_attention"),
    (dict(attn_logit_softcapping=50.0), "transformers' Gemma3Attention ignores it"),
    (dict(hidden_activation="relu"), "activation 'relu'"),
    (dict(rope_parameters={"sliding_attention": {"rope_type": "linear", "factor": 2.0}}),
     "sliding-window layers with rope type 'linear'"),
])
def test_unsupported_gemma3_fields_are_refused(changes, message):
    with pytest.raises(UnsupportedModelError, match=message):
        ModelConfig.from_dict({**BASE, **changes})


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_gemma_norm_equals_transformers_bit_for_bit(dtype):
    hf = Gemma3RMSNorm(96, eps=1e-6)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        hf.weight.copy_(torch.randn(96, generator=gen).to(dtype).float())
    x = (3 * torch.randn(5, 96, generator=gen)).to(dtype)
    scale = 1.0 + hf.weight.detach().float()  # what Gemma3ForCausalLM.load_weights keeps
    assert torch.equal(gemma_rms_norm(TORCH_OPS, x, scale, 1e-6), hf(x))


def test_runner_keeps_norms_as_float32_one_plus_w(tiny_gemma3_path):
    runner = ModelRunner(tiny_gemma3_path, RunnerConfig(max_total_tokens=64, dtype="bfloat16"))
    model = runner.model
    assert type(model) is Gemma3ForCausalLM
    hf = AutoModelForCausalLM.from_pretrained(tiny_gemma3_path, dtype=torch.float32)
    ref = hf.model.layers[1].pre_feedforward_layernorm.weight
    ours = model.layers[1].pre_feedforward_layernorm
    assert ours.dtype == torch.float32 and torch.equal(ours, 1.0 + ref)
    assert model.layers[0].self_attn.q_norm.dtype == torch.float32
    assert model.embed_tokens.weight.dtype == torch.bfloat16
    rope = [layer.self_attn.rope.key for layer in model.layers]
    assert rope == ["rope_sliding", "rope_sliding", "rope", "rope_sliding"]


def test_a_multimodal_checkpoint_serves_its_language_model(tiny_gemma3_path, tmp_path):
    """Gemma3ForConditionalGeneration's layout (text_config; model.language_model.* tensors
    beside a vision tower): the same logits as the text checkpoint."""
    dst = tmp_path / "mm"
    dst.mkdir()
    text_cfg = json.loads((tiny_gemma3_path / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({
        "architectures": ["Gemma3ForConditionalGeneration"], "model_type": "gemma3",
        "text_config": text_cfg}))
    tensors = {name.replace("model.", "model.language_model.", 1): w for name, w in
               load_file(tiny_gemma3_path / "model.safetensors").items()}
    tensors["model.vision_tower.vision_model.post_layernorm.weight"] = torch.ones(8)
    save_file(tensors, dst / "model.safetensors", metadata={"format": "pt"})
    ids = list(range(3, 30))
    logits = []
    for path in (tiny_gemma3_path, dst):
        runner = ModelRunner(path, RunnerConfig(max_total_tokens=64))
        slots, _ = runner.allocator.extend_slots([], len(ids), True)
        logits.append(runner.forward([SeqSpec(ids, slots, logits_start=0)]))
    assert torch.equal(*logits)


def test_final_logit_softcapping_matches_hf(tiny_gemma3_path, tmp_path):
    """``final_logit_softcapping`` (Gemma 2 style; Gemma 3 checkpoints set it null)."""
    path = with_config(tiny_gemma3_path, tmp_path / "capped", final_logit_softcapping=1.0)
    ids = AutoTokenizer.from_pretrained(path)(
        '{"name": "Heidi", "age": 6, "city": "Paris", "job": "teacher"}').input_ids
    assert_runner_matches_hf(path, ids, 16)


def test_the_engine_prompts_span_several_windows(tiny_gemma3_path, engine_prompts):
    ids = AutoTokenizer.from_pretrained(tiny_gemma3_path)(engine_prompts[0]).input_ids
    assert len(ids) >= 5 * WINDOW


@pytest.mark.parametrize("page_size", [1, 16])
def test_engine_greedy_and_logprobs_match_hf(check_engine_against_hf, tiny_gemma3_path,
                                             page_size):
    check_engine_against_hf(tiny_gemma3_path, page_size)
