"""The collectives of Megatron tensor parallelism, wrapped around an already-built model.

The model is built from :meth:`TPSharding.local_config` (so q/k/v, gate/up, o and down already
have this rank's shapes) and loaded with :func:`iter_sharded_weights`; then
:func:`apply_tensor_parallel` adds the communication: an all-reduce after each row-parallel
projection (o, down), a masked lookup + all-reduce for the vocabulary-parallel embedding, and
an all-gather of the vocabulary-parallel logits. The wrappers hold whatever linear module the
model has (``nn.Linear`` or a packed / quantized one), so they go on after any packing.
"""

from __future__ import annotations

import torch
from torch import nn

from .process_group import TPGroup
from .sharding import TPSharding


class RowParallel(nn.Module):
    """``inner`` holds this rank's input columns; the outputs are summed over ranks."""

    def __init__(self, inner: nn.Module, group: TPGroup) -> None:
        super().__init__()
        self.inner = inner
        self.group = group

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.group.all_reduce(self.inner(x))  # bias only on rank 0 (sharded_weights)


class VocabParallelEmbedding(nn.Module):
    """``inner`` holds rows ``[start, start + rows)``; other ids contribute zeros, then sum."""

    def __init__(self, inner: nn.Embedding, start: int, group: TPGroup) -> None:
        super().__init__()
        self.inner = inner
        self.start = start
        self.group = group

    @property
    def weight(self) -> torch.Tensor:  # the tied LM head reads this rank's vocabulary rows
        return self.inner.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        local = ids - self.start
        outside = (local < 0) | (local >= self.inner.num_embeddings)
        out = self.inner(local.masked_fill(outside, 0))  # [T, hidden]
        out.masked_fill_(outside[:, None], 0.0)
        return self.group.all_reduce(out)


class LogitsGather(nn.Module):
    """Per-rank vocabulary slices ``[N, V/tp]`` -> full logits ``[N, vocab]`` on every rank."""

    def __init__(self, group: TPGroup, vocab_size: int) -> None:
        super().__init__()
        self.group = group
        self.vocab_size = vocab_size

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return self.group.all_gather_last_dim(logits)[:, : self.vocab_size]


def apply_tensor_parallel(model: nn.Module, sharding: TPSharding, group: TPGroup) -> None:
    """Add the collectives to a Llama-family model built with local shapes (in place)."""
    for layer in model.layers:
        layer.self_attn.o_proj = RowParallel(layer.self_attn.o_proj, group)
        layer.mlp.down_proj = RowParallel(layer.mlp.down_proj, group)
    model.embed_tokens = VocabParallelEmbedding(model.embed_tokens, sharding.vocab[0], group)
    model.gather_logits = LogitsGather(group, sharding.vocab_size)
