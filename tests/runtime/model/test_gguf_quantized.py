"""A GGUF's Q4_0/Q4_1 weights and a Q8_0 LM head kept on their own bits equal the gguf
package's dequantization (synthetic files of every type, and the real SmolLM2 Q4_1 file); other
Q8_0 projections are reported as dequantized (torch's int8 kernel takes per-channel scales
only)."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest
import torch
from gguf.quants import quantize

from radixlm.runtime.model.gguf_checkpoint import GGUFCheckpoint
from radixlm.runtime.model.gguf_quantized import gguf_source, load_gguf_int4

H, FFN, HEADS, KV_HEADS, VOCAB = 64, 96, 2, 1, 40  # head_dim 32: whole Q4 blocks everywhere


def write_quantized_gguf(path: Path, types: dict[str, str]) -> Path:
    """One Llama layer; tensor ``name`` stored as ``types.get(name, "F32")``."""
    w = gguf.GGUFWriter(str(path), "llama")
    for add, value in ((w.add_block_count, 1), (w.add_context_length, 64),
                       (w.add_embedding_length, H), (w.add_feed_forward_length, FFN),
                       (w.add_head_count, HEADS), (w.add_head_count_kv, KV_HEADS),
                       (w.add_layer_norm_rms_eps, 1e-5), (w.add_rope_dimension_count, H // HEADS)):
        add(value)
    rng = np.random.default_rng(1)
    kv = KV_HEADS * H // HEADS
    shapes = {"token_embd.weight": (VOCAB, H), "output_norm.weight": (H,),
              "blk.0.attn_norm.weight": (H,), "blk.0.ffn_norm.weight": (H,),
              "blk.0.attn_q.weight": (H, H), "blk.0.attn_k.weight": (kv, H),
              "blk.0.attn_v.weight": (kv, H), "blk.0.attn_output.weight": (H, H),
              "blk.0.ffn_gate.weight": (FFN, H), "blk.0.ffn_up.weight": (FFN, H),
              "blk.0.ffn_down.weight": (H, FFN)}
    for name, shape in shapes.items():
        data = rng.standard_normal(shape).astype(np.float32)
        qtype = getattr(gguf.GGMLQuantizationType, types.get(name, "F32"))
        if qtype == gguf.GGMLQuantizationType.F32:
            w.add_tensor(name, data)
        else:
            w.add_tensor(name, quantize(data, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def assert_int4_equals_dequantized(path: Path) -> dict[str, str]:
    """Every kept linear (int4, and a Q8_0 head) dequantizes to exactly the float32 weights
    of the checkpoint."""
    kept = load_gguf_int4(path)
    floats = dict(GGUFCheckpoint(path).iter_weights())
    parts = {"self_attn.qkv_proj": ("q_proj", "k_proj", "v_proj"), "self_attn.o_proj":
             ("o_proj",), "mlp.gate_up_proj": ("gate_proj", "up_proj"),
             "mlp.down_proj": ("down_proj",)}
    for name, weight in kept.kept.items():
        if name == "lm_head":
            ref = floats.get("lm_head.weight", floats["model.embed_tokens.weight"])
        else:
            prefix, fused = name.rsplit(".", 2)[0], ".".join(name.rsplit(".", 2)[1:])
            ref = torch.cat([floats[f"model.{prefix}.{fused.split('.')[0]}.{p}.weight"]
                             for p in parts[fused]])
        assert torch.equal(weight.dequantize(), ref), name
    return kept.dequantized


@pytest.mark.parametrize("qtype", ["Q4_0", "Q4_1"])
def test_q4_blocks_map_exactly(tmp_path, qtype):
    names = ["blk.0.attn_q.weight", "blk.0.attn_k.weight", "blk.0.attn_v.weight",
             "blk.0.attn_output.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
             "blk.0.ffn_down.weight", "token_embd.weight"]
    path = write_quantized_gguf(tmp_path / "m.gguf", dict.fromkeys(names, qtype))
    assert assert_int4_equals_dequantized(path) == {}
    assert set(load_gguf_int4(path).int4) == {"layers.0.self_attn.qkv_proj",
                                               "layers.0.self_attn.o_proj",
                                               "layers.0.mlp.gate_up_proj",
                                               "layers.0.mlp.down_proj", "lm_head"}


def test_other_types_stay_dequantized_and_a_mixed_fusion_stays_float(tmp_path):
    path = write_quantized_gguf(tmp_path / "m.gguf", {
        "token_embd.weight": "Q8_0", "blk.0.attn_q.weight": "Q4_1",
        "blk.0.attn_k.weight": "Q8_0", "blk.0.attn_v.weight": "Q4_1",
        "blk.0.ffn_down.weight": "Q4_0"})
    dequantized = assert_int4_equals_dequantized(path)
    assert dequantized == {"blk.0.attn_k.weight": "Q8_0"}  # the Q8_0 head is kept
    assert set(load_gguf_int4(path).int4) == {"layers.0.mlp.down_proj"}  # qkv: k is Q8_0
    assert set(load_gguf_int4(path).int8) == {"lm_head"}


def test_the_real_q4_1_file_maps_exactly(real_model):
    dequantized = assert_int4_equals_dequantized(real_model.gguf)
    assert dequantized == {}  # the tied head (Q8_0) is kept as int8 groups: see the module doc
    assert len(load_gguf_int4(real_model.gguf).int4) == 4 * 30
    assert set(load_gguf_int4(real_model.gguf).int8) == {"lm_head"}
    assert gguf_source(real_model.folder) == real_model.gguf
