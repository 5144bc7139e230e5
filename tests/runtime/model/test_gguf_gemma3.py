"""A tiny ``gemma3`` GGUF, written as llama.cpp's converter writes one (tensor names from
gguf-py's TensorNameMap, RMSNorm weights stored as ``1 + w``, the window in
``gemma3.attention.sliding_window``, no local base or window pattern in the metadata), loads in
radixlm and equals transformers' own GGUF load of the same file: config, prefill logits within
1e-4 of the logit scale and greedy tokens, on prompts five windows long. head_dim is 256, so
llama.cpp's softmax scale (1/sqrt(head_dim)) and transformers' default
``query_pre_attn_scalar`` (256) agree."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import quantize
from transformers import AutoModelForCausalLM, Gemma3TextConfig

from radixlm.runtime.model.gguf_checkpoint import GGUFCheckpoint
from radixlm.runtime.model.gguf_conversion import ensure_converted
from radixlm.runtime.model.model_config import ModelConfig
from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.testing.greedy import greedy_generate
from radixlm.testing.prefill_oracle import TOL, assert_prefill_matches_hf

WINDOW, LAYERS, VOCAB = 8, 7, 512  # layer 5 global (every 6th), the others sliding
SHAPE = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=LAYERS,
             num_attention_heads=2, num_key_value_heads=1, head_dim=256, vocab_size=VOCAB,
             sliding_window=WINDOW, max_position_embeddings=256, rms_norm_eps=1e-6)
NEW_TOKENS = 16


def write_gemma3_gguf(path: Path) -> None:
    """A seeded random Gemma 3 (norms perturbed away from 0) in llama.cpp's layout: norms F32
    as ``1 + w``, the embedding Q8_0, the other matrices alternately Q8_0 and Q4_0."""
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(Gemma3TextConfig(**SHAPE))
    # HF name -> llama.cpp's, from gguf-py's own table (what convert_hf_to_gguf.py uses)
    names = gguf.get_tensor_name_map(gguf.MODEL_ARCH.GEMMA3, LAYERS)
    w = gguf.GGUFWriter(str(path), "gemma3")
    w.add_context_length(SHAPE["max_position_embeddings"])
    w.add_embedding_length(SHAPE["hidden_size"])
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(SHAPE["intermediate_size"])
    w.add_head_count(SHAPE["num_attention_heads"])
    w.add_head_count_kv(SHAPE["num_key_value_heads"])
    w.add_key_length(SHAPE["head_dim"])
    w.add_value_length(SHAPE["head_dim"])
    w.add_rope_freq_base(1e6)
    w.add_layer_norm_rms_eps(SHAPE["rms_norm_eps"])
    w.add_sliding_window(WINDOW)
    w.add_vocab_size(VOCAB)
    gen = torch.Generator().manual_seed(1)
    for i, (name, t) in enumerate(model.state_dict().items()):
        if name == "lm_head.weight":
            continue  # tied: llama.cpp writes no output.weight
        data = t.float().numpy()
        gguf_name = names.get_name(name, try_suffixes=(".weight",))
        if name.endswith("norm.weight"):  # Gemma3RMSNorm scales by 1 + w; w starts at 0
            data = 1.0 + 0.3 * torch.randn(data.shape, generator=gen).numpy()
            w.add_tensor(gguf_name, data.astype(np.float32))
            continue
        qtype = (gguf.GGMLQuantizationType.Q8_0 if "embed" in name or i % 2
                 else gguf.GGMLQuantizationType.Q4_0)
        w.add_tensor(gguf_name, quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


@pytest.fixture(scope="module")
def gemma3_gguf(tmp_path_factory: pytest.TempPathFactory):
    """(the GGUF, radixlm's conversion of it, transformers' own load of it)."""
    tmp = tmp_path_factory.mktemp("gguf-gemma3")
    write_gemma3_gguf(tmp / "g.gguf")
    folder = ensure_converted(tmp / "g.gguf", tmp / "cache", need_tokenizer=False)
    hf = AutoModelForCausalLM.from_pretrained(tmp, gguf_file="g.gguf",
                                              dtype=torch.float32).eval()
    return tmp / "g.gguf", folder, hf


def prompts() -> list[list[int]]:
    gen = torch.Generator().manual_seed(2)
    return [torch.randint(4, VOCAB, (n,), generator=gen).tolist() for n in (5 * WINDOW, 13, 1)]


def test_the_config_is_transformers_reading_of_the_file(gemma3_gguf):
    path, _, hf = gemma3_gguf
    cfg = ModelConfig.from_dict(GGUFCheckpoint(path).hf_config())
    assert cfg.model_type == "gemma3_text" and cfg.tie_word_embeddings
    assert cfg.sliding_windows == (WINDOW,) * 5 + (0, WINDOW)
    assert list(hf.config.layer_types) == ["sliding_attention" if w else "full_attention"
                                           for w in cfg.sliding_windows]
    assert cfg.attention_scale == hf.config.query_pre_attn_scalar**-0.5
    assert cfg.rope.theta == hf.config.rope_parameters["full_attention"]["rope_theta"]
    assert cfg.sliding_rope.theta == hf.config.rope_parameters["sliding_attention"]["rope_theta"]
    assert cfg.hidden_act == hf.config.hidden_activation


def test_norms_are_read_back_as_w(gemma3_gguf):
    path, _, hf = gemma3_gguf
    ours = dict(GGUFCheckpoint(path).iter_weights())
    for name in ("model.layers.0.post_attention_layernorm.weight",
                 "model.layers.6.self_attn.k_norm.weight", "model.norm.weight"):
        assert torch.equal(ours[name], hf.state_dict()[name]), name


@pytest.mark.parametrize("page_size", [1, 16])
def test_prefill_logits_match_transformers(gemma3_gguf, page_size):
    _, folder, hf = gemma3_gguf
    runner = ModelRunner(folder, RunnerConfig(page_size=page_size, max_total_tokens=512))
    assert_prefill_matches_hf(runner, hf, prompts(), TOL, min_std=0.01)


def test_greedy_tokens_match_transformers(gemma3_gguf):
    _, folder, hf = gemma3_gguf
    runner = ModelRunner(folder, RunnerConfig(page_size=1, max_total_tokens=512))
    for ids, out in zip(prompts(), greedy_generate(runner, prompts(), NEW_TOKENS)):
        ref = hf.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False,
                          eos_token_id=None, attention_mask=torch.ones(1, len(ids),
                                                                       dtype=torch.long))
        assert out == ref[0, len(ids):].tolist()
