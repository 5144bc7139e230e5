"""Variants of the tiny checkpoints that differ only in ``config.json``: the families and
RoPE scalings served from a sibling's weights (Mistral from Llama's, Llama 3.x RoPE, Phi-3
longrope), so each is tested against transformers without another builder preset."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

LONGROPE = {"rope_type": "longrope", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
            "short_factor": [1.0, 1.3, 2.1, 3.7], "long_factor": [1.5, 2.5, 4.0, 8.0]}
# name -> (the tiny checkpoint it copies, its config.json changes)
VARIANTS: dict[str, tuple[str, dict[str, Any]]] = {
    # Mistral 7B v0.2+ (no window), and a window shorter than the test prompts
    "mistral": ("llama", dict(architectures=["MistralForCausalLM"], model_type="mistral",
                              sliding_window=None)),
    "mistral-window": ("llama", dict(architectures=["MistralForCausalLM"],
                                     model_type="mistral", sliding_window=8)),
    # Llama 3.1's scaling with a short original context, so every regime (kept, smoothed,
    # divided by factor) has frequencies and the prompts run past the original length
    "llama3-rope": ("llama", dict(rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16})),
    # Phi-3 mini 4k's window (2047 there), shorter than the test prompts
    "phi3-window": ("phi3", dict(sliding_window=8)),
    # Phi-3 128k's longrope; served within the original 64 positions (short factors)
    "phi3-longrope": ("phi3", dict(rope_parameters=LONGROPE, max_position_embeddings=256,
                                   original_max_position_embeddings=64)),
}


def with_config(src: Path, dst: Path, **changes: Any) -> Path:
    """A copy of the checkpoint ``src`` at ``dst`` with ``changes`` made to its config.json."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.update(changes)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst
