"""Model shapes for the built-in tiny checkpoints.

``test`` is the smallest (fast tests, exactness checks), ``tiny`` drives the demo after a short
training run, ``small`` (~20M parameters) is the benchmark model. Llama and Qwen2 variants use
different head dims and GQA ratios so the exactness tests cover both; Qwen3 has an explicit
head_dim twice ``hidden / heads`` (and QK-norm), Phi-3 fused projections and partial rotary;
Gemma 3 (``test`` only) sliding-window layers with a window of 8 beside a global one.
"""

from __future__ import annotations

from typing import Any

ARCHS = ("llama", "qwen2", "qwen3", "phi3", "gemma3")
SIZES = ("test", "tiny", "small")

_SHAPES: dict[tuple[str, str], dict[str, Any]] = {
    # llama: head_dim 16, GQA 2:1, untied embeddings
    ("llama", "test"): dict(hidden_size=64, intermediate_size=176, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=16),
    # qwen2: head_dim 32, GQA 4:1, tied embeddings, qkv bias
    ("qwen2", "test"): dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                            tie_word_embeddings=True),
    # qwen3: head_dim 32 != hidden / heads (16), GQA 2:1, untied, QK-norm
    ("qwen3", "test"): dict(hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=32),
    # phi3: head_dim 16, GQA 2:1, untied, fused qkv / gate_up, half of each head rotates
    ("phi3", "test"): dict(hidden_size=64, intermediate_size=192, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2,
                           partial_rotary_factor=0.5),
    # gemma3: head_dim 32, GQA 2:1, tied, sandwich norms, softmax scale 1/sqrt(24), layers
    # sliding (window 8, local RoPE base) but the third (global base, linear scaling)
    ("gemma3", "test"): dict(hidden_size=64, intermediate_size=160, num_hidden_layers=4,
                             num_attention_heads=4, num_key_value_heads=2, head_dim=32,
                             query_pre_attn_scalar=24, sliding_window=8,
                             layer_types=["sliding_attention", "sliding_attention",
                                          "full_attention", "sliding_attention"],
                             tie_word_embeddings=True),
    ("llama", "tiny"): dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=32),
    ("qwen2", "tiny"): dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=1, head_dim=32,
                            tie_word_embeddings=True),
    ("qwen3", "tiny"): dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                            num_attention_heads=4, num_key_value_heads=2, head_dim=64),
    ("phi3", "tiny"): dict(hidden_size=128, intermediate_size=352, num_hidden_layers=4,
                           num_attention_heads=4, num_key_value_heads=2,
                           partial_rotary_factor=0.75),
    ("llama", "small"): dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8,
                             num_attention_heads=6, num_key_value_heads=2, head_dim=64),
    ("qwen2", "small"): dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8,
                             num_attention_heads=6, num_key_value_heads=2, head_dim=64,
                             tie_word_embeddings=True),
    ("qwen3", "small"): dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8,
                             num_attention_heads=6, num_key_value_heads=2, head_dim=128),
    ("phi3", "small"): dict(hidden_size=384, intermediate_size=1024, num_hidden_layers=8,
                            num_attention_heads=6, num_key_value_heads=2,
                            partial_rotary_factor=0.75),
}


def model_shape(arch: str, size: str) -> dict[str, Any]:
    """Config keyword arguments for ``arch`` at ``size``."""
    if arch not in ARCHS:
        raise ValueError(f"arch must be one of {ARCHS}, got {arch!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {SIZES}, got {size!r}")
    if (arch, size) not in _SHAPES:
        raise ValueError(f"no {size!r} preset for {arch!r}")
    return dict(_SHAPES[(arch, size)])
