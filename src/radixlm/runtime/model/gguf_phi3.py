"""Phi-3's GGUF specifics (``general.architecture`` ``phi3``), as llama.cpp's converter
(``Phi3MiniModel``) writes them.

* Tensors: q | k | v fused as ``attn_qkv`` and gate | up fused as ``ffn_up``, both in Hugging
  Face's row order (no q/k permutation: llama.cpp runs Phi-3 with NEOX, i.e. rotate-half, RoPE);
  they load as the checkpoint's own ``qkv_proj`` / ``gate_up_proj``.
* ``rope.dimension_count`` is the rotary part of a head (``partial_rotary_factor * head_dim``),
  not ``head_dim`` (``hidden / heads``).
* 128k variants: longrope's per-frequency factors as the tensors ``rope_factors_short`` /
  ``rope_factors_long``, the original context as ``rope.scaling.original_context_length`` and
  the cos/sin factor as ``rope.scaling.attn_factor``.
* ``attention.sliding_window``: always written, 0 meaning none.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# GGUF layer tensor -> Hugging Face module, where Phi-3 differs from the shared table.
PHI3_LAYER_TENSORS = {"attn_qkv": "self_attn.qkv_proj", "ffn_up": "mlp.gate_up_proj"}


def phi3_config(field: Callable[[str, Any], Any], vector: Callable[[str], list[float] | None],
                cfg: dict[str, Any]) -> dict[str, Any]:
    """The ``config.json`` entries Phi-3 adds to (or corrects in) the shared ``cfg``;
    ``field(key, default)`` reads ``phi3.<key>``, ``vector(name)`` a 1-D tensor or None."""
    head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
    rotary = int(field("rope.dimension_count", head_dim))
    rope: dict[str, Any] = {"rope_type": "default", "rope_theta": cfg["rope_theta"],
                            "partial_rotary_factor": rotary / head_dim}
    short, long = vector("rope_factors_short.weight"), vector("rope_factors_long.weight")
    if short is not None and long is not None:
        rope.update(rope_type="longrope", short_factor=short, long_factor=long,
                    attention_factor=float(field("rope.scaling.attn_factor", 1.0)))
    out: dict[str, Any] = {
        "head_dim": head_dim,
        "rope_parameters": rope,
        "original_max_position_embeddings": int(field(
            "rope.scaling.original_context_length", cfg["max_position_embeddings"])),
    }
    return out
