"""Gemma 3's ``config.json`` in the generic keys :meth:`ModelConfig.from_dict` reads.

Why a separate step: transformers saves only what differs from ``Gemma3TextConfig``'s own
defaults in some versions (tied embeddings, global RoPE base 1e6, ``query_pre_attn_scalar``
256, window 4096, ...), which differ from the Llama-family defaults the generic reader falls
back on; and Gemma 3 spells per-layer-type RoPE two ways (transformers 4: ``rope_theta`` +
``rope_scaling`` for global layers and ``rope_local_base_freq`` for sliding ones;
transformers 5: ``rope_parameters`` keyed by ``full_attention`` / ``sliding_attention``).
:func:`normalize_gemma3` fills the defaults and writes the transformers 4 spelling, plus
``layer_types`` from the sliding-window pattern when absent.
"""

from __future__ import annotations

from typing import Any

from .unsupported_model import UnsupportedModelError

GEMMA3_TEXT_ARCHITECTURE = "Gemma3ForCausalLM"
# Gemma3TextConfig's defaults (transformers), for keys a saved config may leave out
_DEFAULTS: dict[str, Any] = {
    "vocab_size": 262_208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh", "max_position_embeddings": 131_072,
    "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "eos_token_id": 1, "bos_token_id": 2,
}
GLOBAL_THETA, LOCAL_THETA = 1_000_000.0, 10_000.0
SLIDING_WINDOW_PATTERN = 6  # every 6th layer global, the rest sliding


def is_gemma3(raw: dict[str, Any]) -> bool:
    """Whether ``raw`` is a Gemma 3 text config (``gemma3_text``) or a Gemma 3 multimodal one
    (``gemma3``) holding its text model in ``text_config``."""
    archs = raw.get("architectures") or []
    return (raw.get("model_type") in ("gemma3_text", "gemma3")
            or any(a.startswith("Gemma3") for a in archs))


def normalize_gemma3(raw: dict[str, Any]) -> dict[str, Any]:
    """A copy of ``raw`` (its ``text_config`` for a multimodal config) with Gemma 3's defaults
    filled in, ``layer_types`` set and RoPE in transformers 4 keys; refuses what we cannot run."""
    text = dict(raw.get("text_config") or raw) if raw.get("model_type") == "gemma3" else dict(raw)
    if raw.get("model_type") == "gemma3" or "Gemma3ForCausalLM" not in (
            text.get("architectures") or []):
        text["architectures"] = [GEMMA3_TEXT_ARCHITECTURE]
    cfg = {**_DEFAULTS, **text}  # an explicit null stays null (sliding_window: none)
    if cfg.get("use_bidirectional_attention"):
        raise UnsupportedModelError("Gemma 3 use_bidirectional_attention (an embedding model's "
                                    "attention) is not supported: radixlm serves causal LMs")
    if cfg.get("attn_logit_softcapping") is not None:
        raise UnsupportedModelError(
            "Gemma 3 attn_logit_softcapping is not supported: transformers' Gemma3Attention "
            "ignores it (Gemma 3 checkpoints set it to null), so there is no reference to be "
            "exact against; remove it from config.json to run as transformers does")
    if cfg.get("hidden_activation") is None:  # Gemma 1 era configs name it hidden_act
        cfg["hidden_activation"] = cfg.get("hidden_act") or _DEFAULTS["hidden_activation"]
    if not cfg.get("layer_types"):
        pattern = int(cfg.get("sliding_window_pattern") or cfg.get("_sliding_window_pattern")
                      or SLIDING_WINDOW_PATTERN)
        cfg["layer_types"] = ["sliding_attention" if (i + 1) % pattern else "full_attention"
                              for i in range(int(cfg["num_hidden_layers"]))]
    _normalize_rope(cfg)
    return cfg


def _normalize_rope(cfg: dict[str, Any]) -> None:
    """Per-layer-type ``rope_parameters`` -> ``rope_theta`` / ``rope_scaling`` (global layers)
    and ``rope_local_base_freq`` (sliding layers), in place."""
    params = cfg.pop("rope_parameters", None) or {}
    if "full_attention" in params or "sliding_attention" in params:
        full = dict(params.get("full_attention") or {})
        local = dict(params.get("sliding_attention") or {})
    else:  # a flat dict: the global layers' parameters
        full, local = dict(params), {}
    if local.get("rope_type", "default") != "default":
        raise UnsupportedModelError(f"Gemma 3 sliding-window layers with rope type "
                                    f"{local['rope_type']!r} are not supported (only default)")
    if "rope_theta" in full:
        cfg["rope_theta"] = full.pop("rope_theta")
    cfg.setdefault("rope_theta", GLOBAL_THETA)
    scaling = {**(cfg.get("rope_scaling") or {}), **full}
    if scaling.get("rope_type", scaling.get("type", "default")) != "default":
        cfg["rope_scaling"] = scaling
    else:
        cfg.pop("rope_scaling", None)
    cfg["rope_local_base_freq"] = float(local.get("rope_theta")
                                        or cfg.get("rope_local_base_freq") or LOCAL_THETA)
