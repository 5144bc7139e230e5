"""How each GGUF architecture we load differs from llama.cpp's Llama layout.

One :class:`GGUFFamily` per ``general.architecture``: the Hugging Face architecture and
model_type it is served as, whether llama.cpp permuted its q/k rows, its tensor names where
they differ from the common table in ``gguf_checkpoint.py``, whether its RMSNorm weights are
stored as ``1 + w``, and the config keys only it has. Learned from gguf-py's
``MODEL_TENSORS`` / ``TENSOR_NAMES`` and llama.cpp's converter and loader (Gemma 3: norms
written ``w + 1``, which transformers' GGUF loader undoes; window pattern 6 and local RoPE base
1e4 hard-wired in llama.cpp unless the metadata says otherwise; attention scale
``1/sqrt(head_dim)``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .gguf_phi3 import PHI3_LAYER_TENSORS, phi3_config

# (metadata key under "<arch>.", default) -> value
ArchField = Callable[[str, Any], Any]
# a 1-D tensor's values by GGUF name (Phi-3's longrope factors), None where absent
ArchVector = Callable[[str], list[float] | None]


@dataclass(frozen=True)
class GGUFFamily:
    """One GGUF architecture's differences (see the module docstring)."""

    hf_architecture: str
    model_type: str
    permuted_qk: bool = False  # llama.cpp's LlamaModel.permute on q_proj / k_proj rows
    layer_tensors: Mapping[str, str] = field(default_factory=dict)  # blk.N.<gguf> -> HF
    norms_plus_one: bool = False  # RMSNorm weights stored as 1 + w (Gemma)
    # extra Hugging Face config keys from the metadata, given the common ones
    config: Callable[[ArchField, ArchVector, dict[str, Any]], dict[str, Any]] | None = None


def _gemma3_config(arch_field: ArchField, _vector: ArchVector,
                   cfg: dict[str, Any]) -> dict[str, Any]:
    """Gemma 3's keys: window, local RoPE base, softmax scale, which layers slide."""
    scale = arch_field("attention.scale", None)
    extra: dict[str, Any] = {
        "sliding_window": int(arch_field("attention.sliding_window", 4096)),
        "rope_local_base_freq": float(arch_field("rope.freq_base_swa", 10000.0)),
        # llama.cpp scales by 1/sqrt(head_dim) unless attention.scale is given
        "query_pre_attn_scalar": cfg["head_dim"] if scale is None else float(scale) ** -2,
        "hidden_activation": "gelu_pytorch_tanh",
    }
    pattern = arch_field("attention.sliding_window_pattern", None)
    if isinstance(pattern, list):  # one bool per layer: True = sliding window
        extra["layer_types"] = ["sliding_attention" if p else "full_attention" for p in pattern]
    elif pattern is not None:  # every pattern-th layer global
        extra["sliding_window_pattern"] = int(pattern)
    cap = arch_field("final_logit_softcapping", None)
    if cap is not None:
        extra["final_logit_softcapping"] = float(cap)
    return extra


GGUF_FAMILIES: dict[str, GGUFFamily] = {
    # llama.cpp writes Llama, Mistral and SmolLM checkpoints as "llama" (with permuted q/k)
    "llama": GGUFFamily("LlamaForCausalLM", "llama", permuted_qk=True),
    "qwen2": GGUFFamily("Qwen2ForCausalLM", "qwen2"),  # q/k/v biases (blk.N.attn_q.bias ...)
    "qwen3": GGUFFamily("Qwen3ForCausalLM", "qwen3"),  # QK-norm (blk.N.attn_q_norm.weight ...)
    # fused attn_qkv / ffn_up (gate | up), partial rotary, longrope factor tensors
    "phi3": GGUFFamily("Phi3ForCausalLM", "phi3", layer_tensors=PHI3_LAYER_TENSORS,
                       config=phi3_config),
    # sandwich norms: ffn_norm is the MLP's input norm, post_* its outputs' (gguf-py GEMMA3)
    "gemma3": GGUFFamily(
        "Gemma3ForCausalLM", "gemma3_text",
        layer_tensors={"post_attention_norm": "post_attention_layernorm",
                       "ffn_norm": "pre_feedforward_layernorm",
                       "post_ffw_norm": "post_feedforward_layernorm"},
        norms_plus_one=True, config=_gemma3_config),
}
