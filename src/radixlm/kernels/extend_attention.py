"""Extend attention: new tokens attend causally to themselves and fully to their cached prefix.

This is the RadixAttention case: request ``i`` has ``n_i`` new query tokens (rows
``qo_indptr[i]:qo_indptr[i+1]`` of q) and ``L_i >= n_i`` KV tokens whose last ``n_i`` are the
new ones; query ``j`` sits at absolute position ``L_i - n_i + j`` and sees keys up to it.
Prefill is the case of an empty prefix.
"""

from __future__ import annotations

import torch

from ._checks import INDEX_DTYPES, check_tensor
from .attention_common import attend, check_attention_args


def causal_mask(
    num_new: int, kv_len: int, sliding_window: int, device: torch.device
) -> torch.Tensor:
    """[1, 1, n, L] bool: query j (absolute kv_len - n + j) attends keys at or before it."""
    q_pos = torch.arange(kv_len - num_new, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    mask = k_pos <= q_pos
    if sliding_window > 0:
        mask &= k_pos > q_pos - sliding_window
    return mask[None, None]


def check_extend_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
) -> None:
    """The attention checks, plus a ``qo_indptr`` shaped like ``kv_indptr``."""
    check_attention_args(q, k_cache, v_cache, kv_indptr, kv_indices)
    check_tensor("qo_indptr", qo_indptr, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    if qo_indptr.shape != kv_indptr.shape:
        raise ValueError(
            f"qo_indptr: expected the shape of kv_indptr {tuple(kv_indptr.shape)}, "
            f"got {tuple(qo_indptr.shape)}"
        )


def extend_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    logit_cap: float = 0.0,
    sliding_window: int = 0,
) -> torch.Tensor:
    """q [T, Hq, D] (all requests' new tokens, concatenated); returns [T, Hq, D]."""
    check_extend_args(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    if qo[-1] != q.shape[0]:
        raise ValueError(f"qo_indptr: last entry {qo[-1]} != number of query tokens {q.shape[0]}")
    out = torch.empty_like(q)
    h, d = k_cache.shape[2], k_cache.shape[3]
    k_flat, v_flat = k_cache.view(-1, h, d), v_cache.view(-1, h, d)
    for i in range(len(qo) - 1):
        n, kv_len = qo[i + 1] - qo[i], kv[i + 1] - kv[i]
        if n == 0:
            continue
        if kv_len < n:
            raise ValueError(f"request {i}: {kv_len} KV tokens cannot hold its {n} new tokens")
        slots = kv_indices[kv[i] : kv[i + 1]].long()
        k = k_flat[slots].transpose(0, 1).unsqueeze(0)  # [1, Hkv, L, D]
        v = v_flat[slots].transpose(0, 1).unsqueeze(0)
        qi = q[qo[i] : qo[i + 1]].transpose(0, 1).unsqueeze(0)  # [1, Hq, n, D]
        mask = causal_mask(n, kv_len, sliding_window, q.device)
        out[qo[i] : qo[i + 1]] = attend(qi, k, v, mask, sm_scale, logit_cap)[0].transpose(0, 1)
    return out
