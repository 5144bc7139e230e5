"""Triton KV store: write each new token's K and V rows into its pool slot.

Matches :func:`store_kv_ref`. One program per token copies its ``[H, D]`` K and V tiles to
``cache[slot]`` (the pool viewed flat as ``[num_slots, H, D]``); no arithmetic, so any dtype
is copied bit for bit.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.kv_store import check_store_args
from .launch import check_launchable, check_same_device, check_unit_inner_stride, next_pow2


@triton.jit
def _copy_rows(src_ptr, dst_ptr, token, slot, stride_st, stride_sh, stride_ds, stride_dh,
               NUM_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
               BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr):
    offs_h = tl.arange(0, BLOCK_H)[:, None]
    offs_d = tl.arange(0, BLOCK_D)[None, :]
    mask = (offs_h < NUM_HEADS) & (offs_d < HEAD_DIM)
    rows = tl.load(src_ptr + token * stride_st + offs_h * stride_sh + offs_d, mask=mask)
    tl.store(dst_ptr + slot * stride_ds + offs_h * stride_dh + offs_d, rows, mask=mask)


@triton.jit
def _store_kv_kernel(
    k_cache_ptr, v_cache_ptr, slots_ptr, k_ptr, v_ptr,
    stride_kt, stride_kh, stride_vt, stride_vh, stride_cs, stride_ch,
    NUM_HEADS: tl.constexpr, HEAD_DIM: tl.constexpr,
    BLOCK_H: tl.constexpr, BLOCK_D: tl.constexpr,
):
    token = tl.program_id(0).to(tl.int64)
    slot = tl.load(slots_ptr + token).to(tl.int64)
    _copy_rows(k_ptr, k_cache_ptr, token, slot, stride_kt, stride_kh, stride_cs, stride_ch,
               NUM_HEADS, HEAD_DIM, BLOCK_H, BLOCK_D)
    _copy_rows(v_ptr, v_cache_ptr, token, slot, stride_vt, stride_vh, stride_cs, stride_ch,
               NUM_HEADS, HEAD_DIM, BLOCK_H, BLOCK_D)


def store_kv_triton(
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    slots: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
) -> None:
    """Triton version of :func:`store_kv_ref`: ``cache[slots[i]] = new[i]`` for K and V.

    k, v: [T, H, D] (rows may be strided, the last dim must be contiguous); slots: [T].
    Slot values are trusted: checking them would cost a device sync.
    """
    check_store_args(k_cache, v_cache, slots, k, v)
    check_launchable("k_cache", k_cache, _store_kv_kernel)
    check_same_device("k_cache", k_cache, v_cache=v_cache, slots=slots, k=k, v=v)
    check_unit_inner_stride("k", k)
    check_unit_inner_stride("v", v)
    if not slots.is_contiguous():
        raise ValueError("slots: expected a contiguous tensor (call .contiguous())")
    num_tokens, num_heads, head_dim = k.shape
    if num_tokens == 0:
        return
    k_flat = k_cache.view(-1, num_heads, head_dim)  # [num_slots, H, D]
    v_flat = v_cache.view(-1, num_heads, head_dim)
    _store_kv_kernel[(num_tokens,)](
        k_flat, v_flat, slots, k, v,
        k.stride(0), k.stride(1), v.stride(0), v.stride(1), k_flat.stride(0), k_flat.stride(1),
        NUM_HEADS=num_heads, HEAD_DIM=head_dim, BLOCK_H=next_pow2(num_heads),
        BLOCK_D=next_pow2(head_dim), num_warps=4,
    )
