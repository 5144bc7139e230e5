"""Writing new keys and values into the paged KV pool.

The pool of one layer is ``[num_pages, page_size, num_kv_heads, head_dim]``; slot ``s`` is
``(s // page_size, s % page_size)``, so a flat view ``[num_pages * page_size, H, D]`` indexes
tokens directly.
"""

from __future__ import annotations

import torch

from .checks import FLOAT_DTYPES, INDEX_DTYPES, check_dim, check_tensor


def check_kv_cache(name: str, cache: torch.Tensor) -> None:
    """A layer's K or V pool: 4-D, float, contiguous."""
    check_tensor(name, cache, ndim=4, dtypes=FLOAT_DTYPES, contiguous=True)


def check_store_args(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slots: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
) -> None:
    check_kv_cache("k_cache", k_cache)
    check_kv_cache("v_cache", v_cache)
    if v_cache.shape != k_cache.shape or v_cache.dtype != k_cache.dtype:
        raise ValueError("v_cache: expected the same shape and dtype as k_cache")
    check_tensor("slots", slots, ndim=1, dtypes=INDEX_DTYPES, device=k_cache.device)
    for name, t in (("k", k), ("v", v)):
        check_tensor(name, t, ndim=3, dtypes=(k_cache.dtype,), device=k_cache.device)
        check_dim(name, t, 0, slots.shape[0])
        check_dim(name, t, 1, k_cache.shape[2])
        check_dim(name, t, 2, k_cache.shape[3])


def store_kv_ref(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slots: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
) -> None:
    """``cache[slots[i]] = new[i]`` for K and V. k, v: [T, H, D]; slots: [T]."""
    check_store_args(k_cache, v_cache, slots, k, v)
    h, d = k_cache.shape[2], k_cache.shape[3]
    k_cache.view(-1, h, d).index_copy_(0, slots.long(), k)
    v_cache.view(-1, h, d).index_copy_(0, slots.long(), v)
