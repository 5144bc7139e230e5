"""Qwen3: the shared decoder plus QK-norm.

Each query and key head is RMS-normalised over ``head_dim`` (weights ``q_norm`` / ``k_norm``,
shared by all heads) before RoPE, as ``Qwen3Attention`` does. ``head_dim`` is explicit in the
config and may differ from ``hidden_size / heads``; there is no qkv bias (``attention_bias``).
A kernel set with ``qk_norm_rotary`` (the native CPU set) normalises and rotates the heads in
one call, writing contiguous q and k.
"""

from __future__ import annotations

import torch
from torch import nn

from ....kernels import KernelOps
from ..forward_batch import ForwardBatch
from ..model_config import ModelConfig
from .decoder import DecoderAttention, DecoderForCausalLM
from .rope import RopeTables


class Qwen3Attention(DecoderAttention):
    """Decoder attention whose query and key heads are RMS-normalised before rotation."""

    def __init__(self, cfg: ModelConfig, layer_id: int, ops: KernelOps, rope: RopeTables) -> None:
        super().__init__(cfg, layer_id, ops, rope)
        self.eps = cfg.rms_norm_eps
        self.q_norm = nn.Parameter(torch.empty(cfg.head_dim))
        self.k_norm = nn.Parameter(torch.empty(cfg.head_dim))

    def _rotated_qk(self, qkv: torch.Tensor, batch: ForwardBatch
                    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The set's fused QK-norm + rotary where it has one and the norm is the set's
        ``rms_norm`` (float32 heads and weights: Gemma's norm too); else the two steps."""
        fused, f32 = self.ops.qk_norm_rotary, torch.float32
        if (fused is None or self.ops.rotary_rows is None or self.rotary_dim != self.head_dim
                or not qkv.dtype == self.q_norm.dtype == self.k_norm.dtype == f32):
            return super()._rotated_qk(qkv, batch)
        qk = qkv[:, :self.q_size + self.kv_size].view(
            qkv.shape[0], self.num_heads + self.num_kv_heads, self.head_dim)
        return fused(qk, self.num_heads, self.q_norm, self.k_norm, self.eps,
                     *self._rotary_tables(batch, qkv.dtype))

    def _qk_heads(self, qkv: torch.Tensor) -> torch.Tensor:
        """Normalised ``[T, Hq + Hkv, D]``: one RMSNorm row per head (``[T * H, D]``)."""
        t, d, hq, hkv = qkv.shape[0], self.head_dim, self.num_heads, self.num_kv_heads
        q = qkv[:, :self.q_size].reshape(t * hq, d)
        k = qkv[:, self.q_size:self.q_size + self.kv_size].reshape(t * hkv, d)
        q = self._norm_heads(q, self.q_norm).view(t, hq, d)
        k = self._norm_heads(k, self.k_norm).view(t, hkv, d)
        return torch.cat((q, k), 1)

    def _norm_heads(self, rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        """RMSNorm of head rows ``[T * H, D]`` (Gemma 3 overrides it with its own norm)."""
        return self.ops.rms_norm(rows, weight, self.eps)


class Qwen3ForCausalLM(DecoderForCausalLM):
    """Qwen3 (dense): the decoder with :class:`Qwen3Attention`."""

    attention = Qwen3Attention
