"""The peers ``benchmarks/kernels_gpu.py`` times each attention kernel against: PyTorch's
``scaled_dot_product_attention`` over KV gathered beforehand (the gather left out of its time)
and FlashInfer's paged kernels when FlashInfer is installed."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F


def dense_kv(cache: torch.Tensor, kv_indptr: torch.Tensor,
             kv_indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Gather each request's KV into [B, H, Lmax, D] and a [B, Lmax] validity mask."""
    lens = (kv_indptr[1:] - kv_indptr[:-1]).long()
    max_len = int(lens.max())
    pos = torch.arange(max_len, device=cache.device)
    valid = pos[None, :] < lens[:, None]
    flat = (kv_indptr[:-1, None].long() + pos).clamp(max=kv_indices.numel() - 1)
    rows = cache.view(-1, cache.shape[2], cache.shape[3])[kv_indices.long()[flat]]
    return rows.transpose(1, 2).contiguous(), valid


def flashinfer_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      pools: tuple[torch.Tensor, ...]) -> Callable[[], object] | str:
    """FlashInfer's paged decode on the same pool, or why it is not available."""
    try:
        import flashinfer

        workspace = torch.empty(256 << 20, dtype=torch.uint8, device=q.device)
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
        page_indptr, page_indices, last = pools[4:]
        wrapper.plan(page_indptr, page_indices, last, q.shape[1], k_cache.shape[2],
                     q.shape[2], k_cache.shape[1], q_data_type=q.dtype)
        return lambda: wrapper.run(q, (k_cache, v_cache))
    except Exception as e:  # not installed, or an API of another version
        return f"n/a ({type(e).__name__})"


def flashinfer_extend(q: torch.Tensor, qo_indptr: torch.Tensor, k_cache: torch.Tensor,
                      v_cache: torch.Tensor,
                      pools: tuple[torch.Tensor, ...]) -> Callable[[], object] | str:
    """FlashInfer's paged causal prefill (bottom-right aligned, as ours), or why not."""
    try:
        import flashinfer

        workspace = torch.empty(256 << 20, dtype=torch.uint8, device=q.device)
        wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(workspace, "NHD")
        page_indptr, page_indices, last = pools[4:]
        wrapper.plan(qo_indptr, page_indptr, page_indices, last, q.shape[1], k_cache.shape[2],
                     q.shape[2], k_cache.shape[1], causal=True, q_data_type=q.dtype)
        return lambda: wrapper.run(q, (k_cache, v_cache))
    except Exception as e:
        return f"n/a ({type(e).__name__})"


def sdpa_extend(q: torch.Tensor, qo_indptr: torch.Tensor, k_cache: torch.Tensor,
                v_cache: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
                news: list[int], prefixes: list[int], scale: float) -> Callable[[], object]:
    """One padded SDPA call: queries [B, Hq, Nmax, D], a bottom-right causal mask."""
    k_dense, valid = dense_kv(k_cache, kv_indptr, kv_indices)
    v_dense, _ = dense_kv(v_cache, kv_indptr, kv_indices)
    n_max = max(news)
    rows = torch.arange(n_max, device=q.device)
    q_pad = torch.zeros(len(news), q.shape[1], n_max, q.shape[2], dtype=q.dtype,
                        device=q.device)
    for i, n in enumerate(news):
        q_pad[i, :, :n] = q[int(qo_indptr[i]) : int(qo_indptr[i]) + n].transpose(0, 1)
    q_pos = torch.tensor(prefixes, device=q.device)[:, None] + rows  # [B, Nmax]
    key_pos = torch.arange(k_dense.shape[2], device=q.device)
    mask = (key_pos[None, None, :] <= q_pos[:, :, None]) & valid[:, None, :]
    mask = mask[:, None]  # [B, 1, Nmax, Lmax]; padded query rows still see key 0
    return lambda: F.scaled_dot_product_attention(q_pad, k_dense, v_dense, attn_mask=mask,
                                                  scale=scale, enable_gqa=True)
