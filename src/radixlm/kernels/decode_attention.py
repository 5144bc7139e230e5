"""Decode attention: one new query token per request over its KV in the paged pool.

Reference (CPU path): gather each request's KV into a padded batch and run softmax attention.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attention_common import attend, check_attention_args, gather_padded_kv


@dataclass(frozen=True)
class DecodePlan:
    """Padded gather indices for a decode batch, built once per forward and shared by layers."""

    slots: torch.Tensor  # [B, L] pool slot of each (request, position); padding reads slot 0
    mask: torch.Tensor  # [B, 1, 1, L] bool, True where the key is attended


def plan_decode(
    kv_indptr: torch.Tensor, kv_indices: torch.Tensor, sliding_window: int = 0
) -> DecodePlan:
    """Build the padded layout; ``sliding_window > 0`` keeps only the last ``window`` keys."""
    lens = (kv_indptr[1:] - kv_indptr[:-1]).long()  # [B]
    if lens.numel() and int(lens.min()) < 1:
        raise ValueError("kv_indptr: every decode request needs at least one KV token")
    max_len = int(lens.max()) if lens.numel() else 0
    pos = torch.arange(max_len, device=kv_indptr.device)
    valid = pos[None, :] < lens[:, None]  # [B, L]
    if sliding_window > 0:
        valid &= pos[None, :] >= (lens[:, None] - sliding_window)
    flat = (kv_indptr[:-1, None].long() + pos[None, :]).masked_fill(~valid, 0)
    slots = kv_indices.long()[flat] if kv_indices.numel() else flat
    return DecodePlan(slots=slots, mask=valid[:, None, None, :])


def decode_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    logit_cap: float = 0.0,
    sliding_window: int = 0,
    plan: DecodePlan | None = None,
) -> torch.Tensor:
    """Attention of q [B, Hq, D] over each request's KV; returns [B, Hq, D]."""
    check_attention_args(q, k_cache, v_cache, kv_indptr, kv_indices)
    if kv_indptr.shape[0] != q.shape[0] + 1:
        raise ValueError(
            f"kv_indptr: expected {q.shape[0] + 1} entries for {q.shape[0]} queries, "
            f"got {kv_indptr.shape[0]}"
        )
    if q.shape[0] == 0:
        return torch.empty_like(q)
    if plan is None:
        plan = plan_decode(kv_indptr, kv_indices, sliding_window)
    k = gather_padded_kv(k_cache, plan.slots)
    v = gather_padded_kv(v_cache, plan.slots)
    out = attend(q.unsqueeze(2), k, v, plan.mask, sm_scale, logit_cap)  # [B, Hq, 1, D]
    return out.squeeze(2)
