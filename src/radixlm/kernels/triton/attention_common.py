"""Triton device functions shared by the decode and extend attention kernels.

Both kernels run the same online softmax (FlashAttention style) over blocks of keys read
from the paged pool through slot indices; they differ only in which query rows a program
owns and which keys each row may see. Scores are kept in base 2 (``exp2``): the running
maximum ``m`` and log-sum ``l`` of a row satisfy ``sum_j 2^(s_j - m) = l``.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from .launch import (
    check_launchable,
    check_out,
    check_same_device,
    check_unit_inner_stride,
    next_pow2,
)


@triton.jit
def soft_cap(s, cap):
    """``cap * tanh(s / cap)``, with tanh written via exp (Triton has no portable tanh)."""
    x = s / cap
    return cap * (1.0 - 2.0 / (tl.exp(2.0 * x) + 1.0))


@triton.jit
def load_rows(
    cache_ptr, slots, kv_head, offs_d, valid_n, stride_slot, stride_head,
    HEAD_DIM: tl.constexpr, WIDEN: tl.constexpr,
):
    """Rows ``cache[slots, kv_head, :]`` -> [BLOCK_N, BLOCK_D]; rows where ``valid_n`` is
    false, and columns past HEAD_DIM, read 0. WIDEN casts to float32."""
    ptrs = cache_ptr + slots[:, None] * stride_slot + kv_head * stride_head + offs_d[None, :]
    rows = tl.load(ptrs, mask=valid_n[:, None] & (offs_d[None, :] < HEAD_DIM), other=0.0)
    if WIDEN:
        rows = rows.to(tl.float32)
    return rows


@triton.jit
def attend_keys(
    q, q_pos, k_ptr, v_ptr, kv_indices_ptr, kv_start, lo, hi, kv_head,
    stride_ks, stride_kh, stride_vs, stride_vh, sm_scale, logit_cap, sliding_window,
    ROWS: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr,
    CAUSAL: tl.constexpr, HAS_CAP: tl.constexpr, LOW_PRECISION: tl.constexpr,
):
    """Online softmax of query rows ``q`` [ROWS, BLOCK_D] over the request's keys lo..hi-1.

    Key position i lives at pool slot ``kv_indices[kv_start + i]``. CAUSAL: row r (at
    absolute position ``q_pos[r]``) sees key j only when ``q_pos[r] - sliding_window < j <=
    q_pos[r]`` (no lower bound without a window); otherwise every key in the range counts.
    Returns ``(m, l, acc)``: per row the running max and log-sum (base 2) and the
    unnormalised output [ROWS, BLOCK_D].
    """
    offs_d = tl.arange(0, BLOCK_D)
    m_i = tl.full([ROWS], float("-inf"), tl.float32)
    l_i = tl.zeros([ROWS], tl.float32)
    acc = tl.zeros([ROWS, BLOCK_D], tl.float32)
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        valid_n = offs_n < hi
        slots = tl.load(kv_indices_ptr + kv_start + offs_n, mask=valid_n, other=0).to(tl.int64)
        k = load_rows(k_ptr, slots, kv_head, offs_d, valid_n, stride_ks, stride_kh, HEAD_DIM,
                      not LOW_PRECISION)  # [BLOCK_N, BLOCK_D]
        if LOW_PRECISION:  # half-precision operands on tensor cores, float32 accumulation
            s = tl.dot(q, tl.trans(k))
        else:
            s = tl.dot(q, tl.trans(k), input_precision="ieee")
        s = s * sm_scale  # [ROWS, BLOCK_N]
        if HAS_CAP:
            s = soft_cap(s, logit_cap)
        valid = valid_n[None, :]  # [1 or ROWS, BLOCK_N]
        if CAUSAL:
            valid = valid & (offs_n[None, :] <= q_pos[:, None])
            if sliding_window > 0:
                valid = valid & (offs_n[None, :] > q_pos[:, None] - sliding_window)
        s = tl.where(valid, s * 1.4426950408889634, float("-inf"))  # * log2(e): base 2 on
        m_new = tl.maximum(m_i, tl.max(s, 1))
        # A row that has seen no valid key yet keeps m = -inf; subtracting 0 instead avoids
        # -inf - -inf = NaN, and its p and alpha are then exactly 0.
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(s - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        v = load_rows(v_ptr, slots, kv_head, offs_d, valid_n, stride_vs, stride_vh, HEAD_DIM,
                      not LOW_PRECISION)  # loaded after QK^T: K and V are never both live
        if LOW_PRECISION:
            pv = tl.dot(p.to(v.dtype), v)
        else:
            pv = tl.dot(p, v, input_precision="ieee")
        acc = acc * alpha[:, None] + pv
        m_i = m_new
    return m_i, l_i, acc


@triton.jit
def normalize(acc, l_i):
    """``acc / l`` per row; rows that saw no key (l = 0) come out as 0, never NaN."""
    l_safe = tl.where(l_i == 0.0, 1.0, l_i)
    return acc / l_safe[:, None]


def prepare_launch(
    q: torch.Tensor, out: torch.Tensor | None, kernel: object, **index_tensors: torch.Tensor
) -> torch.Tensor:
    """Launch checks both attention launchers add to the references' argument checks.

    ``index_tensors`` (indptrs, indices) must be contiguous and on q's device; returns
    ``out`` checked, or a fresh output buffer shaped like q.
    """
    check_launchable("q", q, kernel)
    check_same_device("q", q, out=out, **index_tensors)
    check_unit_inner_stride("q", q)
    for name, t in index_tensors.items():
        if not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous tensor (call .contiguous())")
    if out is None:
        return torch.empty(q.shape, dtype=q.dtype, device=q.device)
    check_out("out", out, tuple(q.shape), q)
    return out


def flat_pools(
    k_cache: torch.Tensor, v_cache: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, int]:
    """The pools as [num_slots, Hkv, D] (slot-indexed), and the head-dim tile (>= 16 for
    ``tl.dot``)."""
    heads, head_dim = k_cache.shape[2], k_cache.shape[3]
    block_d = max(next_pow2(head_dim), 16)
    return k_cache.view(-1, heads, head_dim), v_cache.view(-1, heads, head_dim), block_d
