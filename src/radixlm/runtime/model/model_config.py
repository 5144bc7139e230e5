"""A model's architecture, read from a Hugging Face folder's ``config.json``.

Both transformers 4 (``rope_theta`` + ``rope_scaling``) and transformers 5 (``rope_parameters``)
spellings are read. Anything we cannot run faithfully raises :class:`UnsupportedModelError`
naming the field, rather than running with silently different numerics.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .gemma3_config import GEMMA3_TEXT_ARCHITECTURE, is_gemma3, normalize_gemma3
from .unsupported_model import UnsupportedModelError

SUPPORTED_ARCHITECTURES = {
    "LlamaForCausalLM": "llama",
    "Qwen2ForCausalLM": "qwen2",
    "MistralForCausalLM": "mistral",
    "Qwen3ForCausalLM": "qwen3",
    "Phi3ForCausalLM": "phi3",
    GEMMA3_TEXT_ARCHITECTURE: "gemma3_text",
}
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3", "longrope")
# The gated MLP's activation (HF ``hidden_act`` / Gemma's ``hidden_activation``)
SUPPORTED_ACTIVATIONS = ("silu", "gelu_pytorch_tanh")


@dataclass(frozen=True)
class RopeConfig:
    """Rotary embedding parameters (theta and optional frequency scaling)."""

    theta: float = 10000.0
    rope_type: str = "default"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192
    partial_rotary_factor: float = 1.0  # the fraction of head_dim that rotates (Phi-3)
    # longrope (Phi-3): per-frequency divisors for contexts within / beyond the original length
    short_factor: tuple[float, ...] = ()
    long_factor: tuple[float, ...] = ()
    attention_factor: float = 1.0  # cos and sin are multiplied by it (longrope)
    # llama.cpp's per-frequency divisors (a GGUF's ``rope_freqs.weight``: Llama 3.x scaling
    # precomputed by its converter), applied after the rope type's own scaling
    freq_factors: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.rope_type not in SUPPORTED_ROPE_TYPES:
            raise UnsupportedModelError(
                f"rope type {self.rope_type!r} is not supported; expected one of "
                f"{SUPPORTED_ROPE_TYPES}"
            )
        if self.theta <= 0 or self.factor <= 0:
            raise UnsupportedModelError(
                f"rope theta and factor must be positive, got {self.theta} and {self.factor}"
            )
        if not 0 < self.partial_rotary_factor <= 1:
            raise UnsupportedModelError(f"partial_rotary_factor must be in (0, 1], got "
                                        f"{self.partial_rotary_factor}")
        if self.rope_type == "longrope" and not self.short_factor:
            raise UnsupportedModelError("longrope rope scaling needs its short_factor list")

    @property
    def max_positions(self) -> int | None:
        """The longest context these tables are exact for, or None for no limit.

        longrope switches a whole forward to ``long_factor`` once its sequence passes
        ``original_max_position_embeddings`` (transformers' ``longrope_frequency_update``),
        which re-rotates every position of that forward: it depends on the batch, not the
        position, so it cannot be cached per token. We serve the short-factor range only."""
        return self.original_max_position_embeddings if self.rope_type == "longrope" else None


@dataclass(frozen=True)
class ModelConfig:
    """Everything the model runner needs to know about a Llama-family checkpoint."""

    architecture: str
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    rms_norm_eps: float
    max_position_embeddings: int
    rope: RopeConfig = field(default_factory=RopeConfig)
    tie_word_embeddings: bool = False
    qkv_bias: bool = False
    o_bias: bool = False
    mlp_bias: bool = False
    # Per layer: 0 = full attention, W > 0 = keys within the last W positions only.
    sliding_windows: tuple[int, ...] = ()
    # RoPE of the sliding-window layers where it differs from ``rope`` (Gemma 3's local base)
    sliding_rope: RopeConfig | None = None
    query_pre_attn_scalar: float | None = None  # softmax scale 1/sqrt(this); None: head_dim
    final_logit_softcap: float = 0.0  # 0: none; else logits -> cap * tanh(logits / cap)
    hidden_act: str = "silu"
    eos_token_ids: tuple[int, ...] = ()
    bos_token_id: int | None = None
    torch_dtype: str = "float32"

    def __post_init__(self) -> None:
        for name in ("hidden_size", "intermediate_size", "num_layers", "num_heads",
                     "num_kv_heads", "head_dim", "vocab_size", "max_position_embeddings"):
            if getattr(self, name) <= 0:
                raise UnsupportedModelError(f"config {name} must be positive, got "
                                            f"{getattr(self, name)}")
        if self.num_heads % self.num_kv_heads:
            raise UnsupportedModelError(
                f"num_attention_heads ({self.num_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_kv_heads})"
            )
        if self.head_dim % 2 or self.rotary_dim % 2:
            raise UnsupportedModelError(f"head_dim ({self.head_dim}) and its rotary part "
                                        f"({self.rotary_dim}) must be even for RoPE")
        for name in ("short_factor", "long_factor", "freq_factors"):
            n = len(getattr(self.rope, name))
            if n and n != self.rotary_dim // 2:
                raise UnsupportedModelError(f"rope {name} has {n} entries, expected one per "
                                            f"rotary frequency ({self.rotary_dim // 2})")
        if self.hidden_act not in SUPPORTED_ACTIVATIONS:
            raise UnsupportedModelError(f"activation {self.hidden_act!r} is not supported; "
                                        f"expected one of {SUPPORTED_ACTIVATIONS}")
        if self.final_logit_softcap < 0:
            raise UnsupportedModelError(f"final_logit_softcapping must be positive, got "
                                        f"{self.final_logit_softcap}")
        if len(self.sliding_windows) != self.num_layers:
            raise UnsupportedModelError(
                f"sliding_windows needs one entry per layer ({self.num_layers}), "
                f"got {len(self.sliding_windows)}"
            )

    @property
    def rotary_dim(self) -> int:
        """How many leading dims of each head rotate (``head_dim`` unless partial rotary)."""
        return int(self.head_dim * self.rope.partial_rotary_factor)

    @property
    def attention_scale(self) -> float:
        """The factor on q . k before softmax."""
        return (self.query_pre_attn_scalar or self.head_dim) ** -0.5

    @property
    def num_parameters(self) -> int:
        """Parameter count of the checkpoint (embedding counted once when tied)."""
        h, q, kv = self.hidden_size, self.num_heads * self.head_dim, \
            self.num_kv_heads * self.head_dim
        attn = h * (q + 2 * kv) + q * h + (q + 2 * kv) * self.qkv_bias + h * self.o_bias
        gemma = self.model_type == "gemma3_text"  # q/k norms and 4 norms per layer (sandwich)
        attn += 2 * self.head_dim * (self.model_type == "qwen3" or gemma)  # q_norm, k_norm
        mlp = 3 * h * self.intermediate_size + (2 * self.intermediate_size + h) * self.mlp_bias
        embed = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return embed + self.num_layers * (attn + mlp + (4 if gemma else 2) * h) + h

    @property
    def model_type(self) -> str:
        return SUPPORTED_ARCHITECTURES[self.architecture]

    @classmethod
    def from_folder(cls, path: str | Path) -> ModelConfig:
        """Read ``config.json`` (and ``generation_config.json`` for extra EOS ids)."""
        folder = Path(path)
        cfg_path = folder / "config.json"
        if not folder.is_dir():
            raise UnsupportedModelError(f"model path {str(folder)!r} is not a directory")
        if not cfg_path.is_file():
            raise UnsupportedModelError(
                f"{str(folder)!r} is not a Hugging Face checkpoint: config.json is missing"
            )
        try:
            raw = json.loads(cfg_path.read_text())
        except json.JSONDecodeError as exc:
            raise UnsupportedModelError(f"{cfg_path} is not valid JSON: {exc}") from exc
        gen_path = folder / "generation_config.json"
        gen = json.loads(gen_path.read_text()) if gen_path.is_file() else {}
        return cls.from_dict(raw, gen)

    @classmethod
    def from_dict(cls, raw: dict[str, Any], generation: dict[str, Any] | None = None
                  ) -> ModelConfig:
        if is_gemma3(raw):
            raw = normalize_gemma3(raw)
        arch = _architecture(raw)
        hidden = _req(raw, "hidden_size")
        heads = _req(raw, "num_attention_heads")
        layers = _req(raw, "num_hidden_layers")
        model_type = SUPPORTED_ARCHITECTURES[arch]
        bias = bool(raw.get("attention_bias", False)) and model_type != "phi3"
        return cls(
            architecture=arch,
            hidden_size=hidden,
            intermediate_size=_req(raw, "intermediate_size"),
            num_layers=layers,
            num_heads=heads,
            num_kv_heads=raw.get("num_key_value_heads") or heads,
            head_dim=raw.get("head_dim") or hidden // heads,
            vocab_size=_req(raw, "vocab_size"),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 2048)),
            rope=_rope(raw, model_type),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", False)),
            qkv_bias=True if model_type == "qwen2" else bias,
            o_bias=False if model_type == "qwen2" else bias,
            mlp_bias=bool(raw.get("mlp_bias", False)),
            sliding_windows=_sliding_windows(raw, model_type, layers),
            sliding_rope=(None if raw.get("rope_local_base_freq") is None
                          else RopeConfig(theta=float(raw["rope_local_base_freq"]))),
            query_pre_attn_scalar=raw.get("query_pre_attn_scalar"),
            final_logit_softcap=float(raw.get("final_logit_softcapping") or 0.0),
            hidden_act=str(raw.get("hidden_activation") or "silu"),
            eos_token_ids=_eos_ids(raw, generation or {}),
            bos_token_id=raw.get("bos_token_id"),
            torch_dtype=str(raw.get("torch_dtype") or raw.get("dtype") or "float32"),
        )


def _req(raw: dict[str, Any], key: str) -> Any:
    if key not in raw:
        raise UnsupportedModelError(f"config.json has no {key!r}")
    return raw[key]


def _architecture(raw: dict[str, Any]) -> str:
    archs = raw.get("architectures") or []
    for arch in archs:
        if arch in SUPPORTED_ARCHITECTURES:
            return arch
    by_type = {v: k for k, v in SUPPORTED_ARCHITECTURES.items()}
    if not archs and raw.get("model_type") in by_type:
        return by_type[raw["model_type"]]
    raise UnsupportedModelError(
        f"unsupported architecture {archs or raw.get('model_type')!r}; radixlm runs "
        f"{sorted(SUPPORTED_ARCHITECTURES)}"
    )


def _rope(raw: dict[str, Any], model_type: str) -> RopeConfig:
    params = dict(raw.get("rope_parameters") or {})
    scaling = dict(raw.get("rope_scaling") or {})
    merged = {**scaling, **params}
    theta = merged.get("rope_theta", raw.get("rope_theta", 10000.0))
    rope_type = merged.get("rope_type", merged.get("type", "default"))
    partial = float(merged.get("partial_rotary_factor", raw.get("partial_rotary_factor", 1.0)))
    if partial != 1.0 and model_type != "phi3":
        raise UnsupportedModelError(f"partial_rotary_factor={partial} is only supported for "
                                    f"Phi-3; {model_type} rotates whole heads")
    if model_type == "phi3":
        if rope_type in ("su", "yarn"):  # Phi3Config's legacy names for longrope
            rope_type = "longrope"
        if rope_type == "longrope":
            return _longrope(raw, merged, float(theta), partial)
    elif rope_type == "longrope":
        raise UnsupportedModelError(f"rope type 'longrope' is only supported for Phi-3, not "
                                    f"{model_type}")
    return RopeConfig(
        theta=float(theta),
        rope_type=str(rope_type),
        # radixlm's own key: only GGUF conversions (GGUFCheckpoint.hf_config) write it
        freq_factors=tuple(float(f) for f in raw.get("rope_freq_factors") or ()),
        factor=float(merged.get("factor", 1.0)),
        low_freq_factor=float(merged.get("low_freq_factor", 1.0)),
        high_freq_factor=float(merged.get("high_freq_factor", 4.0)),
        original_max_position_embeddings=int(
            merged.get("original_max_position_embeddings", 8192)
        ),
        partial_rotary_factor=partial,
    )


def _longrope(raw: dict[str, Any], merged: dict[str, Any], theta: float,
              partial: float) -> RopeConfig:
    """Phi-3's longrope, as transformers' ``_compute_longrope_parameters`` reads it: the
    original length from the top-level field, the factor defaulting to the ratio of
    lengths, and the attention factor derived from it when not given."""
    max_pos = int(raw.get("max_position_embeddings", 2048))
    # Phi3Config's own field wins over rope_parameters' (and defaults to 4096), as in
    # transformers' standardize_rope_params
    original = int(raw.get("original_max_position_embeddings", 4096))
    factor = merged.get("factor")
    factor = max_pos / original if factor is None else factor
    attention = merged.get("attention_factor")
    if attention is None:
        attention = 1.0 if factor <= 1.0 else math.sqrt(1 + math.log(factor) / math.log(original))
    for key in ("short_factor", "long_factor"):
        if not isinstance(merged.get(key), list):
            raise UnsupportedModelError(f"rope_scaling longrope needs a {key} list")
    return RopeConfig(
        theta=theta, rope_type="longrope", factor=float(factor),
        original_max_position_embeddings=original, partial_rotary_factor=partial,
        short_factor=tuple(float(f) for f in merged["short_factor"]),
        long_factor=tuple(float(f) for f in merged["long_factor"]),
        attention_factor=float(attention),
    )


def _sliding_windows(raw: dict[str, Any], model_type: str, layers: int) -> tuple[int, ...]:
    window = raw.get("sliding_window") or 0
    if model_type in ("qwen2", "qwen3") and not raw.get("use_sliding_window", False):
        window = 0
    if not window:
        return (0,) * layers
    layer_types = raw.get("layer_types")
    if layer_types:
        return tuple(int(window) if t == "sliding_attention" else 0 for t in layer_types)
    if model_type in ("qwen2", "qwen3"):
        first_full = int(raw.get("max_window_layers", layers))
        return tuple(int(window) if i >= first_full else 0 for i in range(layers))
    return (int(window),) * layers


def _as_ids(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, int):
        return [value]
    return [int(v) for v in value]


def _eos_ids(raw: dict[str, Any], generation: dict[str, Any]) -> tuple[int, ...]:
    ids: list[int] = []
    for v in _as_ids(raw.get("eos_token_id")) + _as_ids(generation.get("eos_token_id")):
        if v not in ids:
            ids.append(v)
    return tuple(ids)
