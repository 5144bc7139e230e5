"""Gemma 3 (text, dense): the shared decoder with Gemma's differences, as transformers'
``Gemma3ForCausalLM`` computes them.

* RMSNorm scales by ``1 + w`` and runs in float32 whatever the model's dtype
  (``Gemma3RMSNorm``). The norm weights are kept as float32 ``1 + w`` from load on, so a
  float32 model runs the kernel set's ordinary RMSNorm on them (the same arithmetic); other
  dtypes take :func:`gemma_rms_norm`.
* Sandwich norms: each block normalises its attention and MLP inputs *and* outputs
  (``input`` / ``post_attention`` / ``pre_feedforward`` / ``post_feedforward_layernorm``).
* The embedding is multiplied by ``sqrt(hidden)`` rounded to the embedding's dtype; the LM
  head (tied) uses the unscaled table.
* Per-head QK-norm before RoPE (as Qwen3, with Gemma's norm); the softmax scale is
  ``query_pre_attn_scalar ** -0.5``; optional tanh softcapping of the logits
  (``final_logit_softcapping``; attention-score softcapping is refused by the config reader,
  as transformers' Gemma 3 ignores it).
* A multimodal checkpoint (``Gemma3ForConditionalGeneration``) serves its language model: the
  config reader takes its ``text_config`` and :func:`text_weight_name` its tensors.
* Sliding-window layers (``layer_types``) rotate with their own RoPE base
  (``rope_local_base_freq``), global ones with ``rope_theta`` and its scaling; both handled by
  the config and :class:`~.rope.RopeTables`. The MLP's gate is ``gelu_pytorch_tanh``.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import torch
from torch import nn

from ....kernels import KernelOps
from ...memory.kv_pool import KVPool
from ..forward_batch import ForwardBatch
from ..model_config import ModelConfig
from .decoder import DecoderAttention, DecoderForCausalLM, DecoderLayer
from .qwen3 import Qwen3Attention
from .rope import RopeTables


def gemma_rms_norm(ops: KernelOps, x: torch.Tensor, scale: torch.Tensor, eps: float
                   ) -> torch.Tensor:
    """``Gemma3RMSNorm`` of rows ``x`` [T, D] given ``scale`` = float32 ``1 + w`` [D]: the
    statistics, the scale multiply and its rounding in float32, then cast to x's dtype."""
    if x.dtype == scale.dtype:  # float32: exactly the plain RMSNorm's arithmetic
        return ops.rms_norm(x, scale, eps)
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * scale).to(x.dtype)


def gemma_add_rms_norm(ops: KernelOps, x: torch.Tensor, residual: torch.Tensor,
                       scale: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``(gemma_rms_norm(x + residual), x + residual)``; the sum is the next residual."""
    if x.dtype == scale.dtype:
        return ops.fused_add_rms_norm(x, residual, scale, eps)
    summed = x + residual
    return gemma_rms_norm(ops, summed, scale, eps), summed


# Where a multimodal checkpoint keeps the language model (transformers 5, then 4 layouts)
_TEXT_PREFIXES = ("model.language_model.", "language_model.model.")


def text_weight_name(name: str) -> str | None:
    """The text model's name for a checkpoint tensor (``model.layers.0...``, ``lm_head...``),
    or None for a multimodal checkpoint's vision tower and projector."""
    for prefix in _TEXT_PREFIXES:
        if name.startswith(prefix):
            return "model." + name.removeprefix(prefix)
    if name.startswith(("model.vision_tower.", "vision_tower.", "model.multi_modal_projector.",
                        "multi_modal_projector.")):
        return None
    return name.removeprefix("language_model.")  # 4.x: language_model.lm_head.weight


@functools.cache
def embed_scale(hidden_size: int, dtype: torch.dtype) -> float:
    """``sqrt(hidden)`` as transformers applies it: a float32 tensor cast to the embedding's
    dtype (so bfloat16 models multiply by the bfloat16-rounded value)."""
    return float(torch.tensor(hidden_size**0.5).to(dtype))


class Gemma3Attention(Qwen3Attention):
    """QK-norm attention whose head norms are Gemma's (``1 + w``, float32): on float32 heads
    the set's ``rms_norm`` (:func:`gemma_rms_norm`), so the set's fused ``qk_norm_rotary``
    applies there as it does to Qwen3's."""

    def _norm_heads(self, rows: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return gemma_rms_norm(self.ops, rows, weight, self.eps)


class Gemma3DecoderLayer(DecoderLayer):
    """Sandwich block: norm, attention, norm, residual add; norm, MLP, norm, residual add
    (each residual add deferred to the next norm, as in :class:`DecoderLayer`)."""

    def __init__(self, cfg: ModelConfig, layer_id: int, ops: KernelOps, rope: RopeTables,
                 attention: type[DecoderAttention]) -> None:
        super().__init__(cfg, layer_id, ops, rope, attention)
        self.pre_feedforward_layernorm = nn.Parameter(torch.empty(cfg.hidden_size))
        self.post_feedforward_layernorm = nn.Parameter(torch.empty(cfg.hidden_size))

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None, batch: ForwardBatch,
                pool: KVPool) -> tuple[torch.Tensor, torch.Tensor]:
        h, residual = self._input_norm(x, residual)
        h, residual = self._norm_add_norm(self.self_attn.forward(h, batch, pool), residual)
        return self._norm(self.mlp.forward(h), self.post_feedforward_layernorm), residual

    def _norm_add_norm(self, x: torch.Tensor, residual: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
        """The attention output's norm, the residual add and the MLP input's norm:
        ``_add_norm(_norm(x, post_attention), residual, pre_feedforward)``, in one call of
        the set's ``norm_add_rms_norm`` on float32 rows (the same numbers)."""
        fused, post = self.ops.norm_add_rms_norm, self.post_attention_layernorm
        if fused is not None and x.dtype == post.dtype:
            return fused(x, post, residual, self.pre_feedforward_layernorm, self.eps)
        return self._add_norm(self._norm(x, post), residual, self.pre_feedforward_layernorm)

    def _norm(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return gemma_rms_norm(self.ops, x, weight, self.eps)

    def _add_norm(self, x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor
                  ) -> tuple[torch.Tensor, torch.Tensor]:
        return gemma_add_rms_norm(self.ops, x, residual, weight, self.eps)


class Gemma3ForCausalLM(DecoderForCausalLM):
    """Gemma 3 text (``Gemma3ForCausalLM``, model_type ``gemma3_text``)."""

    attention = Gemma3Attention
    layer = Gemma3DecoderLayer

    def load_weights(self, weights: Iterable[tuple[str, torch.Tensor]]) -> None:
        """As the decoder loads, with every norm weight ``w`` stored as float32 ``1 + w``
        (what ``Gemma3RMSNorm`` multiplies by), whatever the model's dtype."""
        for name, param in self.named_parameters():
            if name.endswith("norm"):  # norm, *_layernorm, self_attn.q_norm / k_norm
                param.data = torch.empty(param.shape, dtype=torch.float32, device=param.device)
        text = ((text_weight_name(name), w) for name, w in weights)
        super().load_weights(
            (name, 1.0 + w.float() if name.endswith("norm.weight") else w)
            for name, w in text if name is not None)

    def embed(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(input_ids)
        return x.mul_(embed_scale(self.config.hidden_size, x.dtype))

    def final_norm(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        h, _ = gemma_add_rms_norm(self.ops, x, residual, self.norm, self.config.rms_norm_eps)
        return h

    def finish_logits(self, logits: torch.Tensor) -> torch.Tensor:
        cap = self.config.final_logit_softcap
        if not cap:
            return logits
        return torch.tanh(logits / cap) * cap  # transformers' order of operations
