"""Triton extend attention: new tokens over their cached prefix and, causally, themselves.

Matches :func:`extend_attention_ref` (the RadixAttention case; prefill is an empty prefix).
One program per (request, query head, block of BLOCK_M new tokens): it reads all of the
request's keys through ``kv_indices`` (prefix slots, then the new tokens' own slots, already
stored) up to its last query's position, and masks per row: key position <= query position,
and inside the sliding window when there is one. Variable lengths share one launch: the grid
covers the longest request and programs past a request's end return at once.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from ..reference.extend_attention import check_extend_args
from . import launch
from .attention_common import (
    attend_keys,
    flat_pools,
    normalize,
    prepare_launch,
)
from .launch import low_precision_dot


@triton.jit
def _extend_kernel(
    q_ptr, k_ptr, v_ptr, qo_indptr_ptr, kv_indptr_ptr, kv_indices_ptr, out_ptr,
    sm_scale, logit_cap, sliding_window,
    stride_qt, stride_qh, stride_ks, stride_kh, stride_vs, stride_vh, stride_ot, stride_oh,
    GROUP: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, HAS_CAP: tl.constexpr,
    LOW_PRECISION: tl.constexpr,
):
    req = tl.program_id(0)
    head = tl.program_id(1)
    block_m = tl.program_id(2)
    q_start = tl.load(qo_indptr_ptr + req).to(tl.int64)
    num_new = (tl.load(qo_indptr_ptr + req + 1) - q_start).to(tl.int32)
    if block_m * BLOCK_M >= num_new:
        return  # this request has fewer new tokens than the longest one
    kv_start = tl.load(kv_indptr_ptr + req).to(tl.int64)
    kv_len = (tl.load(kv_indptr_ptr + req + 1) - kv_start).to(tl.int32)
    prefix = kv_len - num_new

    offs_m = block_m * BLOCK_M + tl.arange(0, BLOCK_M)  # new-token index within the request
    offs_d = tl.arange(0, BLOCK_D)
    row_ok = offs_m < num_new
    q_pos = prefix + offs_m  # absolute position of each query row
    rows = q_start + offs_m
    q_mask = row_ok[:, None] & (offs_d[None, :] < HEAD_DIM)
    q = tl.load(q_ptr + rows[:, None] * stride_qt + head * stride_qh + offs_d[None, :],
                mask=q_mask, other=0.0)  # [BLOCK_M, BLOCK_D]
    if not LOW_PRECISION:
        q = q.to(tl.float32)
    kv_head = head // GROUP

    # Keys this block can see: up to its last row's position; with a window, from the first
    # row's earliest visible key.
    hi = tl.minimum(prefix + (block_m + 1) * BLOCK_M, kv_len)
    lo = 0
    if sliding_window > 0:
        lo = tl.maximum(prefix + block_m * BLOCK_M - sliding_window + 1, 0)
    _, l_i, acc = attend_keys(
        q, q_pos, k_ptr, v_ptr, kv_indices_ptr, kv_start, lo, hi, kv_head,
        stride_ks, stride_kh, stride_vs, stride_vh, sm_scale, logit_cap, sliding_window,
        BLOCK_M, HEAD_DIM, BLOCK_N, BLOCK_D, True, HAS_CAP, LOW_PRECISION,
    )
    out = normalize(acc, l_i)
    o_ptrs = out_ptr + rows[:, None] * stride_ot + head * stride_oh + offs_d[None, :]
    tl.store(o_ptrs, out.to(out_ptr.dtype.element_ty), mask=q_mask)


def _max_new_tokens(qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, num_tokens: int) -> int:
    """The longest request's new-token count, after checking the indptrs (one device sync)."""
    qo, kv = qo_indptr.long(), kv_indptr.long()
    q_lens = qo[1:] - qo[:-1]  # [B]
    room = (kv[1:] - kv[:-1]) - q_lens  # cached prefix length of each request
    if q_lens.numel() == 0:
        last, max_new, min_new, min_room = int(qo[-1]), 0, 0, 0
    else:
        stats = torch.stack((qo[-1], q_lens.max(), q_lens.min(), room.min()))
        last, max_new, min_new, min_room = stats.tolist()
    if last != num_tokens:
        raise ValueError(f"qo_indptr: last entry {last} != number of query tokens {num_tokens}")
    if min_new < 0:
        raise ValueError("qo_indptr: expected non-decreasing entries")
    if min_room < 0:
        raise ValueError("kv_indptr: a request has fewer KV tokens than new tokens")
    return max_new


def extend_attention_triton(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    logit_cap: float = 0.0,
    sliding_window: int = 0,
    *,
    out: torch.Tensor | None = None,
) -> torch.Tensor:
    """Triton version of :func:`extend_attention_ref`; returns ``out`` [T, Hq, D].

    Reads the indptrs back once (to size the grid and check them); ``out``, if given, is
    written in place.
    """
    check_extend_args(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices)
    out = prepare_launch(q, out, _extend_kernel, qo_indptr=qo_indptr, kv_indptr=kv_indptr,
                         kv_indices=kv_indices)
    max_new = _max_new_tokens(qo_indptr, kv_indptr, q.shape[0])
    if max_new == 0:
        return out
    _launch_extend(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, out, sm_scale,
                   logit_cap, sliding_window, max_new)
    return out


def _tiles(block_d: int, low_precision: bool, on_gpu: bool) -> tuple[int, int, int]:
    """(BLOCK_M, BLOCK_N, num_warps). On a GPU, chosen so that no compiled variant spills
    registers on sm_80/86/90 and double-buffered K/V fit the ~100 KB of shared memory of
    sm_86/89 (checked by ``benchmarks/kernels_gpu.py --compile-only``); the interpreter takes
    the bf16 GPU tiles whatever the dtype (fewer, larger steps run faster there)."""
    if low_precision or not on_gpu:
        return (64, 64, 8) if block_d <= 128 else (32, 32, 4)
    # float32: the ieee dot runs on FMA units, register-hungry, and every operand is 4 bytes
    return (32, 32, 4) if block_d <= 64 else (16, 16, 4)


def _launch_extend(
    q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor, kv_indices: torch.Tensor, out: torch.Tensor, sm_scale: float,
    logit_cap: float, sliding_window: int, max_new: int,
) -> None:
    num_heads, head_dim = q.shape[1], q.shape[2]
    num_kv_heads = k_cache.shape[2]
    k_flat, v_flat, block_d = flat_pools(k_cache, v_cache)  # [slots, Hkv, D]
    low_precision = low_precision_dot(q.dtype, q.device)
    on_gpu = launch.on_gpu(q.device)  # looked up at call time: tools replace it
    block_m, block_n, num_warps = _tiles(block_d, low_precision, on_gpu)
    grid = (qo_indptr.shape[0] - 1, num_heads, triton.cdiv(max_new, block_m))
    _extend_kernel[grid](
        q, k_flat, v_flat, qo_indptr, kv_indptr, kv_indices, out,
        sm_scale, logit_cap, sliding_window,
        q.stride(0), q.stride(1), k_flat.stride(0), k_flat.stride(1),
        v_flat.stride(0), v_flat.stride(1), out.stride(0), out.stride(1),
        GROUP=num_heads // num_kv_heads, HEAD_DIM=head_dim, BLOCK_M=block_m, BLOCK_N=block_n,
        BLOCK_D=block_d, HAS_CAP=logit_cap > 0,
        LOW_PRECISION=low_precision, num_warps=num_warps, num_stages=2,
    )
