"""Pieces shared by the decode and extend attention references.

KV for a batch is described FlashInfer-style: request ``i`` reads the pool slots
``kv_indices[kv_indptr[i] : kv_indptr[i + 1]]`` in sequence order (its prefix, then its new
tokens, which were stored before attention runs).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from ._checks import FLOAT_DTYPES, INDEX_DTYPES, check_dim, check_tensor
from .kv_store import check_kv_cache


def check_attention_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
) -> None:
    """q [*, Hq, D]; caches [pages, page_size, Hkv, D]; Hq a multiple of Hkv."""
    check_tensor("q", q, ndim=3, dtypes=FLOAT_DTYPES)
    check_kv_cache("k_cache", k_cache)
    check_kv_cache("v_cache", v_cache)
    if v_cache.shape != k_cache.shape:
        raise ValueError("v_cache: expected the same shape as k_cache")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dtype != q.dtype or cache.device != q.device:
            raise TypeError(f"{name}: expected dtype {q.dtype} on {q.device}, got "
                            f"{cache.dtype} on {cache.device}")
    check_dim("k_cache", k_cache, 3, q.shape[2])
    if q.shape[1] % k_cache.shape[2]:
        raise ValueError(
            f"q: num_heads {q.shape[1]} must be a multiple of num_kv_heads {k_cache.shape[2]}"
        )
    check_tensor("kv_indptr", kv_indptr, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    check_tensor("kv_indices", kv_indices, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    if kv_indptr.shape[0] < 1:
        raise ValueError("kv_indptr: expected at least one element")


def gather_padded_kv(
    cache: torch.Tensor, slots: torch.Tensor
) -> torch.Tensor:
    """Gather ``cache`` rows at ``slots`` [B, L] into [B, Hkv, L, D]."""
    h, d = cache.shape[2], cache.shape[3]
    flat = cache.view(-1, h, d)
    return flat[slots].permute(0, 2, 1, 3)


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor,
    sm_scale: float,
    logit_cap: float,
) -> torch.Tensor:
    """Softmax attention with grouped KV heads.

    q [B, Hq, Lq, D]; k, v [B, Hkv, Lk, D]; mask [B, 1, Lq, Lk] bool (True = attend).
    Query head ``h`` reads KV head ``h // (Hq // Hkv)``, as in Hugging Face.
    """
    if logit_cap <= 0:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=sm_scale, enable_gqa=k.shape[1] != q.shape[1]
        )
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * sm_scale
    scores = logit_cap * torch.tanh(scores / logit_cap)
    scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v.float()).to(q.dtype)
