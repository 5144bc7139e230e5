"""Hugging Face checkpoint tensor names -> the decoder's (fused) parameters.

A split checkpoint (Llama, Qwen2/3, Mistral) stores ``q_proj``/``k_proj``/``v_proj`` and
``gate_proj``/``up_proj`` separately: each fills its row range of our fused ``qkv_proj`` /
``gate_up_proj``. A fused checkpoint (Phi-3) already stores ``qkv_proj`` and ``gate_up_proj``
in our row order (q | k | v, gate | up) and loads them whole (no shards).
"""

from __future__ import annotations

from ..model_config import ModelConfig

# HF shard name -> (our fused parameter, first row, rows)
Shards = dict[str, tuple[str, int, int]]


def fused_shards(cfg: ModelConfig) -> Shards:
    """Where each separately stored projection goes in the fused parameters of ``cfg``."""
    q, kv = cfg.num_heads * cfg.head_dim, cfg.num_kv_heads * cfg.head_dim
    inter = cfg.intermediate_size
    return {
        "q_proj": ("qkv_proj", 0, q), "k_proj": ("qkv_proj", q, kv),
        "v_proj": ("qkv_proj", q + kv, kv), "gate_proj": ("gate_up_proj", 0, inter),
        "up_proj": ("gate_up_proj", inter, inter),
    }


def param_pieces(name: str, shards: Shards) -> int:
    """How many checkpoint tensors fill parameter ``name`` (fused ones take several when the
    checkpoint is split, one when it is stored fused)."""
    for fused in ("qkv_proj", "gate_up_proj"):
        if f".{fused}." in name:
            return sum(1 for target, _, _ in shards.values() if target == fused) or 1
    return 1


def map_name(hf_name: str, shards: Shards) -> tuple[str, int, int | None] | None:
    """HF tensor name -> (our parameter, row offset, rows) or None to skip."""
    if "rotary_emb" in hf_name:
        return None
    name = hf_name.removeprefix("model.")
    if name.endswith("norm.weight"):  # RMSNorm weights are bare parameters (norm, *_layernorm,
        return name.removesuffix(".weight"), 0, None  # Qwen3's self_attn.q_norm / k_norm)
    for shard, (fused, start, size) in shards.items():
        marker = f".{shard}."
        if marker in name:
            return name.replace(marker, f".{fused}."), start, size
    return name, 0, None
