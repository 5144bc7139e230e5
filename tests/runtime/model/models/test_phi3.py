"""Phi-3 (fused projections, partial rotary, longrope): config, loading and exactness against
transformers (the Engine's and the ModelRunner's exactness tests run it too, in
test_engine_exactness.py and test_model_runner.py)."""

from __future__ import annotations

import math

import pytest
from transformers import AutoTokenizer

from radixlm.runtime.model.forward_batch import ContextLengthError, SeqSpec
from radixlm.runtime.model.model_config import ModelConfig, UnsupportedModelError
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.model.models import Phi3ForCausalLM
from radixlm.testing.config_variants import LONGROPE, with_config
from radixlm.testing.prefill_oracle import assert_runner_matches_hf

BASE = dict(architectures=["Phi3ForCausalLM"], hidden_size=64, intermediate_size=128,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, vocab_size=100,
            max_position_embeddings=256, original_max_position_embeddings=64)

def test_config_reads_partial_rotary_both_spellings():
    v5 = ModelConfig.from_dict({**BASE, "rope_parameters": {"rope_theta": 1e4,
                                                            "partial_rotary_factor": 0.75}})
    v4 = ModelConfig.from_dict({**BASE, "rope_theta": 1e4, "partial_rotary_factor": 0.75})
    assert v4.rope == v5.rope and v4.rotary_dim == 12 and v4.head_dim == 16
    assert not v4.qkv_bias and not v4.o_bias


def test_config_reads_longrope_as_transformers_does():
    v4 = ModelConfig.from_dict({**BASE, "rope_scaling": {**LONGROPE, "type": "su"}})
    v5 = ModelConfig.from_dict({**BASE, "rope_parameters": LONGROPE})
    assert v4.rope == v5.rope and v4.rope.rope_type == "longrope"
    assert v4.rope.factor == 4.0 and v4.rope.original_max_position_embeddings == 64
    assert v4.rope.attention_factor == pytest.approx(math.sqrt(1 + math.log(4) / math.log(64)))
    assert v4.rope.max_positions == 64


@pytest.mark.parametrize(("changes", "message"), [
    (dict(rope_parameters={**LONGROPE, "short_factor": [1.0, 2.0]}), "short_factor has 2"),
    (dict(rope_parameters={k: v for k, v in LONGROPE.items() if k != "long_factor"}),
     "needs a long_factor list"),
    (dict(architectures=["LlamaForCausalLM"], rope_parameters=LONGROPE), "only supported"),
    (dict(architectures=["LlamaForCausalLM"], partial_rotary_factor=0.5), "only supported"),
])
def test_unsupported_rope_fields_are_refused(changes, message):
    with pytest.raises(UnsupportedModelError, match=message):
        ModelConfig.from_dict({**BASE, **changes})


def test_runner_loads_fused_projections(tiny_phi3_path):
    runner = ModelRunner(tiny_phi3_path, RunnerConfig(max_total_tokens=64))
    assert type(runner.model) is Phi3ForCausalLM
    assert runner.model_config.rotary_dim == 8 and runner.model.layers[0].self_attn.rotary_dim == 8


def test_longrope_matches_hf_within_the_original_context(tiny_phi3_path, tmp_path):
    """Short factors and the attention factor, prefill and greedy decode, against HF; past
    original_max_position_embeddings (64 here) the runner refuses."""
    path = with_config(tiny_phi3_path, tmp_path / "longrope", rope_parameters=LONGROPE,
                       max_position_embeddings=256, original_max_position_embeddings=64)
    ids = AutoTokenizer.from_pretrained(path)('{"name": "Heidi", "age": 6, "city": "P"').input_ids
    runner = assert_runner_matches_hf(path, ids, 64 - len(ids))
    assert runner.max_context == 64
    long_ids = list(range(5, 75))
    with pytest.raises(ContextLengthError, match="exceeds the model's context of 64"):
        runner.forward([SeqSpec(long_ids, runner.allocator.extend_slots([], 70, True)[0])])


def test_sliding_window_matches_hf(tiny_phi3_path, tmp_path):
    """Phi-3's ``sliding_window`` applies to every layer, as transformers masks it."""
    path = with_config(tiny_phi3_path, tmp_path / "window", sliding_window=8)
    assert ModelConfig.from_folder(path).sliding_windows == (8, 8)
    ids = AutoTokenizer.from_pretrained(path)(
        '{"name": "Heidi", "age": 6, "city": "Paris", "job": "teacher"}').input_ids
    assert len(ids) > 8
    assert_runner_matches_hf(path, ids, 24)
