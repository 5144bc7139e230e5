"""Triton decode attention over the paged KV pool (split-KV, a.k.a. flash-decoding).

Matches :func:`decode_attention_ref`. Stage 1 (``_decode_split_kernel``) runs one program per
(request, KV head, split): it owns every query head of that KV head's group (GQA), padded to
at least 16 rows so ``tl.dot`` is legal, and a contiguous run of the request's keys. It leaves
a partial output and its log-sum-exp per split; stage 2 (``_decode_merge_kernel``) merges the
splits of each (request, query head). With one split, stage 1 writes the final output itself
and stage 2 is skipped. Splits let a small batch with long contexts fill the GPU.

Lengths are read on the device from ``kv_indptr``: the launcher never synchronises. A request
with no KV gets a zero output (the reference raises; checking would cost a sync).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.decode_attention import check_decode_args
from .attention_common import (
    attend_keys,
    flat_pools,
    normalize,
    prepare_launch,
)
from .launch import (
    low_precision_dot,
    next_pow2,
    num_sms,
)

MAX_KV_SPLITS = 16


@triton.jit
def _decode_split_kernel(
    q_ptr, k_ptr, v_ptr, kv_indptr_ptr, kv_indices_ptr, out_ptr, mid_o_ptr, mid_lse_ptr,
    sm_scale, logit_cap, sliding_window, num_heads,
    stride_qb, stride_qh, stride_ks, stride_kh, stride_vs, stride_vh,
    stride_ob, stride_oh, stride_mb, stride_mh, stride_ms,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_H: tl.constexpr,
    BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, NUM_SPLITS: tl.constexpr,
    HAS_CAP: tl.constexpr, LOW_PRECISION: tl.constexpr,
):
    req = tl.program_id(0)
    kv_head = tl.program_id(1)
    split = tl.program_id(2)
    kv_start = tl.load(kv_indptr_ptr + req).to(tl.int64)
    seq_len = (tl.load(kv_indptr_ptr + req + 1) - kv_start).to(tl.int32)
    first = 0  # sliding window: only the last `sliding_window` keys are attended
    if sliding_window > 0:
        first = tl.maximum(seq_len - sliding_window, 0)
    # Splits own whole BLOCK_N blocks; trailing splits of a short request may own nothing.
    chunk = tl.cdiv(tl.cdiv(seq_len - first, NUM_SPLITS), BLOCK_N) * BLOCK_N
    lo = first + split * chunk
    hi = tl.minimum(lo + chunk, seq_len)

    offs_h = tl.arange(0, BLOCK_H)
    offs_d = tl.arange(0, BLOCK_D)
    heads = kv_head * GROUP + offs_h  # query heads of this KV head; rows >= GROUP are padding
    row_ok = offs_h < GROUP
    q_ptrs = q_ptr + req * stride_qb + heads[:, None] * stride_qh + offs_d[None, :]
    q_mask = row_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_ptrs, mask=q_mask, other=0.0)  # [BLOCK_H, BLOCK_D]
    if not LOW_PRECISION:
        q = q.to(tl.float32)

    m_i, l_i, acc = attend_keys(
        q, offs_h, k_ptr, v_ptr, kv_indices_ptr, kv_start, lo, hi, kv_head,
        stride_ks, stride_kh, stride_vs, stride_vh, sm_scale, logit_cap, sliding_window,
        BLOCK_H, HEAD_DIM, BLOCK_N, BLOCK_D, False, HAS_CAP, LOW_PRECISION,
    )  # the window is already in lo
    out = normalize(acc, l_i)
    if NUM_SPLITS == 1:
        o_ptrs = out_ptr + req * stride_ob + heads[:, None] * stride_oh + offs_d[None, :]
        tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=q_mask)
    else:
        row_base = req * stride_mb + heads * stride_mh + split * stride_ms  # [BLOCK_H]
        tl.store(mid_o_ptr + row_base[:, None] + offs_d[None, :], out, mask=q_mask)
        # log2-sum-exp of the split; -inf marks a split that saw no key (weight 0 later).
        lse = tl.where(l_i > 0.0, m_i + tl.log2(tl.where(l_i > 0.0, l_i, 1.0)), float("-inf"))
        lse_ptrs = mid_lse_ptr + (req * num_heads + heads) * NUM_SPLITS + split  # [B, Hq, S]
        tl.store(lse_ptrs, lse, mask=row_ok)


@triton.jit
def _decode_merge_kernel(
    mid_o_ptr, mid_lse_ptr, out_ptr,
    stride_mb, stride_mh, stride_ms, stride_ob, stride_oh, num_heads,
    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, NUM_SPLITS: tl.constexpr,
    BLOCK_S: tl.constexpr,
):
    req = tl.program_id(0)
    head = tl.program_id(1)
    offs_s = tl.arange(0, BLOCK_S)
    offs_d = tl.arange(0, BLOCK_D)
    split_ok = offs_s < NUM_SPLITS
    lse = tl.load(mid_lse_ptr + (req * num_heads + head) * NUM_SPLITS + offs_s,
                  mask=split_ok, other=float("-inf"))  # [BLOCK_S]
    m = tl.max(lse, 0)
    m = tl.where(m == float("-inf"), 0.0, m)
    w = tl.exp2(lse - m)  # empty splits weigh 0
    o_ptrs = (mid_o_ptr + req * stride_mb + head * stride_mh
              + offs_s[:, None] * stride_ms + offs_d[None, :])
    o_mask = split_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    o = tl.load(o_ptrs, mask=o_mask, other=0.0)  # [BLOCK_S, BLOCK_D]
    total = tl.sum(w, 0)
    out = tl.sum(w[:, None] * o, 0) / tl.where(total == 0.0, 1.0, total)
    tl.store(out_ptr + req * stride_ob + head * stride_oh + offs_d,
             out.to(out_ptr.dtype.element_ty), mask=offs_d < HEAD_DIM)


def default_kv_splits(batch: int, num_kv_heads: int, device: torch.device) -> int:
    """Enough splits that stage 1 has about two programs per SM, at most MAX_KV_SPLITS.

    Chosen from the batch shape only (not the lengths, which live on the device).
    """
    programs = max(batch * num_kv_heads, 1)
    return max(1, min(MAX_KV_SPLITS, triton.cdiv(2 * num_sms(device), programs)))


def plan_decode_triton(
    slots: torch.Tensor,
    lens: torch.Tensor,
    page_size: int = 1,
    sliding_window: int = 0,
    workspace: dict[str, torch.Tensor] | None = None,
    cascade: bool = True,
) -> None:
    """The Triton set's decode plan: none (signature of :func:`plan_decode_padded`).

    :func:`decode_attention_triton` reads ``kv_indptr``/``kv_indices`` on the device, so
    nothing is built on the host per forward, and shared prefixes are not grouped: there is
    no Triton cascade kernel yet, each request reads its whole prefix.
    """
    return None


def decode_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    logit_cap: float = 0.0,
    sliding_window: int = 0,
    plan: object | None = None,
    *,
    out: torch.Tensor | None = None,
    num_kv_splits: int | None = None,
) -> torch.Tensor:
    """Triton version of :func:`decode_attention_ref`; returns ``out`` [B, Hq, D].

    ``plan`` is accepted for the reference's signature and ignored (this set's planner,
    :func:`plan_decode_triton`, gives ``None``): the kernel reads ``kv_indptr``/``kv_indices``
    directly. ``out``, if given, is written in place;
    ``num_kv_splits`` overrides the split heuristic.
    """
    check_decode_args(q, k_cache, v_cache, kv_indptr, kv_indices)
    batch = q.shape[0]
    out = prepare_launch(q, out, _decode_split_kernel, kv_indptr=kv_indptr, kv_indices=kv_indices)
    num_kv_heads = k_cache.shape[2]
    splits = num_kv_splits or default_kv_splits(batch, num_kv_heads, q.device)
    if not 1 <= splits <= MAX_KV_SPLITS:
        raise ValueError(f"num_kv_splits: expected 1..{MAX_KV_SPLITS}, got {splits}")
    if batch == 0:
        return out
    _launch_decode(q, k_cache, v_cache, kv_indptr, kv_indices, out, sm_scale, logit_cap,
                   sliding_window, splits)
    return out


def _block_n(block_d: int, low_precision: bool) -> int:
    """Keys per step: K/V tiles of 8 KB (bf16) keep registers unspilled on sm_80/90 (checked
    with ``benchmarks/kernels_gpu.py --compile-only``); float32 at D > 128 takes fewer."""
    if block_d <= 64:
        return 64
    return 32 if low_precision or block_d <= 128 else 16


def _launch_decode(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor, out: torch.Tensor, sm_scale: float, logit_cap: float,
    sliding_window: int, splits: int,
) -> None:
    batch, num_heads, head_dim = q.shape
    num_kv_heads = k_cache.shape[2]
    group = num_heads // num_kv_heads
    k_flat, v_flat, block_d = flat_pools(k_cache, v_cache)  # [slots, Hkv, D]
    low_precision = low_precision_dot(q.dtype, q.device)
    # Per-split partial outputs (normalised) and their log2-sum-exps, [B, Hq, S(, D)];
    # one split writes `out` directly and leaves these stand-ins untouched.
    mid_shape = (batch, num_heads, splits) if splits > 1 else (1, 1, 1)
    mid_o = torch.empty((*mid_shape, head_dim), dtype=torch.float32, device=q.device)
    mid_lse = torch.empty(mid_shape, dtype=torch.float32, device=q.device)
    _decode_split_kernel[(batch, num_kv_heads, splits)](
        q, k_flat, v_flat, kv_indptr, kv_indices, out, mid_o, mid_lse,
        sm_scale, logit_cap, sliding_window, num_heads,
        q.stride(0), q.stride(1), k_flat.stride(0), k_flat.stride(1),
        v_flat.stride(0), v_flat.stride(1), out.stride(0), out.stride(1),
        mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        GROUP=group, HEAD_DIM=head_dim, BLOCK_H=max(16, next_pow2(group)), BLOCK_D=block_d,
        BLOCK_N=_block_n(block_d, low_precision), NUM_SPLITS=splits, HAS_CAP=logit_cap > 0,
        LOW_PRECISION=low_precision, num_warps=4, num_stages=2,
    )
    if splits == 1:
        return
    _decode_merge_kernel[(batch, num_heads)](
        mid_o, mid_lse, out, mid_o.stride(0), mid_o.stride(1), mid_o.stride(2),
        out.stride(0), out.stride(1), num_heads,
        HEAD_DIM=head_dim, BLOCK_D=block_d, NUM_SPLITS=splits, BLOCK_S=next_pow2(splits),
        num_warps=4,
    )
