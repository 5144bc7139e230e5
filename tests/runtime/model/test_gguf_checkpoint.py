"""Bad GGUF input is refused with an error naming the file, the problem and what is supported
(small synthetic files written with gguf's own writer); the q/k un-permutation inverts
llama.cpp's permutation."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch

from radixlm.runtime.model.gguf_checkpoint import GGUFCheckpoint, hf_tensor_name, unpermute_qk
from radixlm.runtime.model.gguf_conversion import resolve_model_path
from radixlm.runtime.model.model_config import ModelConfig, UnsupportedModelError

HIDDEN, HEADS, KV_HEADS, LAYERS, VOCAB = 16, 2, 1, 1, 8


def write_gguf(path: Path, arch: str = "llama", tokenizer: bool = True,
               ffn_down_type: gguf.GGMLQuantizationType | None = None) -> Path:
    """A one-layer Llama-shaped GGUF with F32 tensors (optionally one of another type)."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_block_count(LAYERS)
    w.add_context_length(64)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(32)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    if tokenizer:
        w.add_tokenizer_model("gpt2")
        w.add_token_list([f"t{i}" for i in range(VOCAB)])
    rng = np.random.default_rng(0)
    kv = KV_HEADS * HIDDEN // HEADS
    shapes = {"token_embd.weight": (VOCAB, HIDDEN), "output_norm.weight": (HIDDEN,),
              "blk.0.attn_norm.weight": (HIDDEN,), "blk.0.ffn_norm.weight": (HIDDEN,),
              "blk.0.attn_q.weight": (HIDDEN, HIDDEN), "blk.0.attn_k.weight": (kv, HIDDEN),
              "blk.0.attn_v.weight": (kv, HIDDEN), "blk.0.attn_output.weight": (HIDDEN, HIDDEN),
              "blk.0.ffn_gate.weight": (32, HIDDEN), "blk.0.ffn_up.weight": (32, HIDDEN)}
    for name, shape in shapes.items():
        w.add_tensor(name, rng.standard_normal(shape).astype(np.float32))
    if ffn_down_type is None:
        w.add_tensor("blk.0.ffn_down.weight", rng.standard_normal((HIDDEN, 32)).astype(np.float32))
    else:  # raw blocks: 32 elements per row, one block of that type
        nbytes = gguf.GGML_QUANT_SIZES[ffn_down_type][1]
        w.add_tensor("blk.0.ffn_down.weight", np.zeros((HIDDEN, nbytes), dtype=np.uint8),
                     raw_dtype=ffn_down_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def test_a_synthetic_gguf_reads_as_our_config_and_names(tmp_path):
    ckpt = GGUFCheckpoint(write_gguf(tmp_path / "m.gguf"))
    cfg = ModelConfig.from_dict(ckpt.hf_config())
    assert (cfg.num_layers, cfg.num_heads, cfg.num_kv_heads, cfg.vocab_size) == (
        LAYERS, HEADS, KV_HEADS, VOCAB)
    assert cfg.tie_word_embeddings, "no output.weight: the embedding is the lm head"
    shapes = {name: tuple(t.shape) for name, t in ckpt.iter_weights()}
    assert shapes["model.embed_tokens.weight"] == (VOCAB, HIDDEN)
    assert shapes["model.layers.0.mlp.down_proj.weight"] == (HIDDEN, 32)
    assert len(shapes) == 11


@pytest.mark.parametrize(("gguf_name", "hf_name"), [
    ("token_embd.weight", "model.embed_tokens.weight"),
    ("blk.12.attn_k.weight", "model.layers.12.self_attn.k_proj.weight"),
    ("blk.0.ffn_norm.weight", "model.layers.0.post_attention_layernorm.weight"),
    ("output.weight", "lm_head.weight"),
    ("blk.3.attn_q.bias", "model.layers.3.self_attn.q_proj.bias"),
    ("blk.1.attn_q_norm.weight", "model.layers.1.self_attn.q_norm.weight"),
    ("blk.1.attn_k_norm.weight", "model.layers.1.self_attn.k_norm.weight"),
    ("rope_freqs.weight", None),
])
def test_tensor_names_map_to_hugging_face_names(gguf_name, hf_name):
    assert hf_tensor_name(gguf_name) == hf_name


@pytest.mark.parametrize(("gguf_name", "hf_name"), [
    ("blk.2.attn_qkv.weight", "model.layers.2.self_attn.qkv_proj.weight"),
    ("blk.0.ffn_up.weight", "model.layers.0.mlp.gate_up_proj.weight"),  # gate | up
    ("blk.0.ffn_down.weight", "model.layers.0.mlp.down_proj.weight"),
    ("rope_factors_long.weight", None),  # read into the config, not loaded as a weight
])
def test_phi3_fused_tensor_names(gguf_name, hf_name):
    assert hf_tensor_name(gguf_name, "phi3") == hf_name


@pytest.mark.parametrize(("heads", "head_dim", "cols"), [(1, 2, 1), (3, 8, 5), (9, 64, 4)])
def test_unpermute_inverts_the_converters_permutation(heads, head_dim, cols):
    w = torch.randn(heads * head_dim, cols)
    # llama.cpp's convert_hf_to_gguf: reshape(heads, 2, d/2, ...).swapaxes(1, 2)
    permuted = w.reshape(heads, 2, head_dim // 2, cols).transpose(1, 2).reshape(w.shape)
    assert torch.equal(unpermute_qk(permuted, heads), w)


def test_unsupported_architecture_names_file_arch_and_supported(tmp_path):
    path = write_gguf(tmp_path / "falcon.gguf", arch="falcon")
    with pytest.raises(UnsupportedModelError) as info:
        GGUFCheckpoint(path)
    msg = str(info.value)
    assert str(path) in msg and "'falcon'" in msg
    assert all(f"'{arch}'" in msg for arch in ("llama", "qwen2", "qwen3"))


def test_unsupported_tensor_type_names_tensor_type_and_supported(tmp_path):
    path = write_gguf(tmp_path / "iq.gguf", ffn_down_type=gguf.GGMLQuantizationType.IQ4_NL)
    with pytest.raises(UnsupportedModelError) as info:
        GGUFCheckpoint(path)
    msg = str(info.value)
    assert str(path) in msg and "blk.0.ffn_down.weight" in msg and "IQ4_NL" in msg
    assert "Q4_1" in msg and "Q8_0" in msg


@pytest.mark.parametrize("keep", [0.5, 0.99])
def test_truncated_file_is_named_as_truncated(tmp_path, keep):
    path = write_gguf(tmp_path / "cut.gguf")
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    with pytest.raises(UnsupportedModelError) as info:
        GGUFCheckpoint(path)
    assert str(path) in str(info.value) and "truncated" in str(info.value)


def test_missing_tokenizer_metadata_says_what_is_needed(tmp_path):
    path = write_gguf(tmp_path / "notok.gguf", tokenizer=False)
    with pytest.raises(UnsupportedModelError) as info:
        resolve_model_path(path, cache_root=tmp_path / "cache")
    msg = str(info.value)
    assert str(path) in msg and "tokenizer.ggml.tokens" in msg and "--tokenizer-path" in msg
    assert not list((tmp_path / "cache").glob("*")), "nothing half-converted is left behind"


def test_a_folder_with_several_ggufs_asks_for_one(tmp_path):
    write_gguf(tmp_path / "a.gguf")
    write_gguf(tmp_path / "b.gguf")
    with pytest.raises(UnsupportedModelError, match="several GGUF files"):
        resolve_model_path(tmp_path, cache_root=tmp_path / "cache")
