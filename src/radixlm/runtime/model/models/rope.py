"""RoPE frequency tables from a :class:`RopeConfig`, computed as Hugging Face computes them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from ..model_config import ModelConfig, RopeConfig


def inv_frequencies(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    """[head_dim / 2] float32 inverse frequencies, after the config's scaling (``head_dim``:
    the rotated part of a head)."""
    inv_freq = _typed_inv_frequencies(rope, head_dim)
    if rope.freq_factors:  # llama.cpp's rope_freqs: theta_i = pos * inv_freq_i / factor_i
        return inv_freq / torch.tensor(rope.freq_factors, dtype=torch.float32)
    return inv_freq


def _typed_inv_frequencies(rope: RopeConfig, head_dim: int) -> torch.Tensor:
    exponents = torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim
    if rope.rope_type == "longrope":
        # short factors only: ModelRunner caps the context at RopeConfig.max_positions
        short = torch.tensor(rope.short_factor, dtype=torch.float32)
        return 1.0 / (short * rope.theta**exponents)
    inv_freq = 1.0 / (rope.theta**exponents)
    if rope.rope_type == "linear":
        return inv_freq / rope.factor
    if rope.rope_type == "llama3":
        return _llama3_scale(inv_freq, rope)
    return inv_freq


def _llama3_scale(inv_freq: torch.Tensor, rope: RopeConfig) -> torch.Tensor:
    old_len = rope.original_max_position_embeddings
    low_wavelen = old_len / rope.low_freq_factor
    high_wavelen = old_len / rope.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_wavelen, inv_freq / rope.factor, inv_freq)
    smooth = (old_len / wavelen - rope.low_freq_factor) / (
        rope.high_freq_factor - rope.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / rope.factor + smooth * scaled
    medium = ~(wavelen < high_wavelen) & ~(wavelen > low_wavelen)
    return torch.where(medium, smoothed, scaled)


def cos_sin_tables(
    rope: RopeConfig, head_dim: int, max_positions: int, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Float32 ``cos`` and ``sin`` of shape [max_positions, head_dim / 2] (``head_dim``: the
    rotated part of a head, ``ModelConfig.rotary_dim``)."""
    inv_freq = inv_frequencies(rope, head_dim)
    positions = torch.arange(max_positions, dtype=torch.float32)
    freqs = positions[:, None] * inv_freq[None, :]
    cos, sin = freqs.cos(), freqs.sin()
    if rope.attention_factor != 1.0:  # longrope's scaling of cos and sin, as transformers does
        cos, sin = cos * rope.attention_factor, sin * rope.attention_factor
    return cos.to(device), sin.to(device)


@dataclass(frozen=True)
class RopeTables:
    """The cos/sin tables every attention layer rotates with, float32 on the model's device.

    Built before the model (outside its meta-device construction) and handed to each layer;
    plain tensors, not module buffers, so casting the model's dtype leaves them float32.
    ``sliding`` holds the sliding-window layers' own tables where their RoPE differs
    (Gemma 3's local base); a layer picks its tables with :meth:`for_layer`.
    """

    cos: torch.Tensor  # [max_positions, head_dim / 2]
    sin: torch.Tensor  # [max_positions, head_dim / 2]
    key: str = "rope"  # names the rows gathered from these tables in ForwardBatch.cache
    sliding: RopeTables | None = None

    @classmethod
    def build(
        cls, rope: RopeConfig, head_dim: int, max_positions: int, device: torch.device
    ) -> RopeTables:
        """Tables for positions ``[0, max_positions)``."""
        return cls(*cos_sin_tables(rope, head_dim, max_positions, device))

    @classmethod
    def for_model(cls, cfg: ModelConfig, max_positions: int, device: torch.device
                  ) -> RopeTables:
        """The tables of every layer of ``cfg``: ``cfg.rope``'s, plus ``cfg.sliding_rope``'s
        for the sliding-window layers when the config has one."""
        sliding = None
        if cfg.sliding_rope is not None:
            sliding = cls(*cos_sin_tables(cfg.sliding_rope, cfg.rotary_dim, max_positions,
                                          device), key="rope_sliding")
        return cls(*cos_sin_tables(cfg.rope, cfg.rotary_dim, max_positions, device),
                   sliding=sliding)

    def for_layer(self, sliding_window: int) -> RopeTables:
        """The tables a layer with ``sliding_window`` (0: full attention) rotates with."""
        return self.sliding if sliding_window > 0 and self.sliding is not None else self
