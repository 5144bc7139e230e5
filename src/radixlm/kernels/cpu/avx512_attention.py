"""Attention of many query rows over one run of keys, on the native AVX-512 kernel.

The shared-prefix (cascade) decode puts every member's query heads of one KV head into one
row block against the group's prefix keys
(:func:`~radixlm.kernels.reference.decode_attention.group_prefix_parts`); this is that part
with :func:`partial_attention`'s signature, one C call (``native/avx512_attention.c``, beside
this file: flash attention, register-blocked 6 rows x 64 keys). It reads
the keys and values through their strides, so a view of the paged pool ``[L, Hkv, D]``
transposed to ``[1, Hkv, L, D]`` needs no copy. Anything it was not built for (a mask, a
logit cap, another dtype or head size, no AVX-512) goes to ``partial_attention`` unchanged.
A prefill's causal part runs on the same kernel (:func:`causal_prefill_by_slot`: the pool
read by slot, the query and output rows in the runner's own layout).

Numbers: within float32 rounding of
:func:`~radixlm.kernels.reference.attention_common.partial_attention_matmul` (its own e^x and
summation order; ~1e-6 relative, tested on odd sizes).
"""

from __future__ import annotations

import torch

from ..reference.attention_common import partial_attention
from .native import load

_NATIVE = load("avx512_attention")
_F32 = torch.float32
_I64 = torch.int64
HEAD_DIMS = (64, 128, 256)  # the kernel's register blocking is written for these


def prefix_attention_available() -> bool:
    """True if the native module is built and this CPU has AVX-512 F."""
    return _NATIVE is not None and bool(_NATIVE.supported())


_AVAILABLE = prefix_attention_available()


def _native_case(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
                 logit_cap: float) -> bool:
    """q [1, Hkv, R, D] contiguous; k, v [1, Hkv, L, D] with unit stride along D and the same
    strides: what the kernel reads through pointers."""
    if not (_AVAILABLE and mask is None and logit_cap <= 0 and type(q) is torch.Tensor
            and q.dtype is _F32 and q.is_cpu and q.dim() == 4 and q.shape[0] == 1):
        return False
    return q.is_contiguous() and q.shape[2] > 0 and _kv_views(k, v, q.shape[1], q.shape[3])


def _kv_views(k: torch.Tensor, v: torch.Tensor, hkv: int, d: int) -> bool:
    """k, v float32 CPU ``[1, Hkv, L, D]`` with unit stride along D and the same strides, D
    one of :data:`HEAD_DIMS`."""
    return (all(type(t) is torch.Tensor and t.dtype is _F32 and t.is_cpu and t.dim() == 4
                and t.shape[0] == 1 for t in (k, v))
            and d in HEAD_DIMS and k.shape == v.shape and k.shape[1] == hkv
            and k.shape[3] == d and k.stride() == v.stride() and k.stride(3) == 1
            and k.stride(2) >= d)


def prefix_partial_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             mask: torch.Tensor | None, sm_scale: float, logit_cap: float
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`partial_attention`: ``(out [N, Hkv, G, D], lse [N, Hkv, G,
    1])``; for N = 1, no mask and no cap, float32 CPU tensors with D 64, 128 or 256, one native
    call, else the torch function."""
    if not _native_case(q, k, v, mask, logit_cap):
        return partial_attention(q, k, v, mask, sm_scale, logit_cap)
    _, hkv, rows, d = q.shape
    length = k.shape[2]
    out = torch.empty(q.shape)
    lse = torch.empty(1, hkv, rows, 1)
    _NATIVE.prefix_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), k.stride(2),
                             k.stride(1), out.data_ptr(), lse.data_ptr(), hkv, rows, length, d,
                             float(sm_scale), -1, 1)
    return out, lse


def causal_prefill_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             sm_scale: float, logit_cap: float, first: int
                             ) -> torch.Tensor | None:
    """One request's new tokens, q ``[n, Hq, D]`` (token ``t`` at key position ``first + t``),
    causally over k, v ``[1, Hkv, L, D]`` (views of the pool, as
    :func:`prefix_partial_attention` takes them): ``[n, Hq, D]`` in one native call, the
    same kernel with each row's keys cut at its own position and the key blocks past a row
    block's last position skipped (q and the result read and written in the tokens' own
    layout, no transposed copies); ``None`` where the kernel does not apply (no AVX-512, a
    logit cap, another head size or dtype): the caller's torch path then runs.

    A 512-token prefill on SmolLM2's 9 query / 3 KV heads of 64: 1.6 vs 4.6 ms a layer for
    torch's SDPA in blocks of 128 query rows (the masked flash kernel materializes its bias).
    """
    if not (_AVAILABLE and type(q) is torch.Tensor and q.dtype is _F32 and q.is_cpu
            and q.dim() == 3 and logit_cap <= 0 and k.dim() == 4):
        return None
    n, hq, d = q.shape
    hkv = k.shape[1]
    if (n == 0 or hkv == 0 or hq % hkv or first < 0 or first + n > k.shape[2]
            or not _kv_views(k, v, hkv, d)):
        return None
    q = q.contiguous()
    out = torch.empty(q.shape)
    _NATIVE.prefix_attention(q.data_ptr(), k.data_ptr(), v.data_ptr(), k.stride(2),
                             k.stride(1), out.data_ptr(), 0, hkv, n * (hq // hkv), first + n,
                             d, float(sm_scale), first, hq // hkv, hq * d, (hq // hkv) * d)
    return out


def causal_prefill_by_slot(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                           slots: torch.Tensor, sm_scale: float, logit_cap: float, first: int,
                           out: torch.Tensor) -> torch.Tensor | None:
    """:func:`causal_prefill_attention` over the request's keys read from the paged pools
    ``[pages, page_size, Hkv, D]`` by slot (``slots`` [L] int64, key position order): no
    gathered or sliced copy of the keys whatever the slots, the result written into ``out``
    (``[n, Hq, D]``, contiguous) and returned; ``None`` (nothing written) where the kernel
    does not apply. The extend attention's causal part in the native kernel set."""
    if not (_plain_rows(q) and _plain_rows(out) and out.shape == q.shape and logit_cap <= 0
            and _AVAILABLE and type(slots) is torch.Tensor and slots.dtype is _I64
            and slots.is_cpu and slots.dim() == 1 and slots.is_contiguous()):
        return None
    n, hq, d = q.shape
    if not all(type(c) is torch.Tensor and c.dtype is _F32 and c.is_cpu and c.dim() == 4
               and c.is_contiguous() for c in (k_cache, v_cache)):
        return None
    hkv, length = k_cache.shape[2], slots.shape[0]
    if (k_cache.shape != v_cache.shape or d not in HEAD_DIMS or k_cache.shape[3] != d
            or n == 0 or hq % hkv or first < 0 or first + n != length):
        return None
    group = hq // hkv
    _NATIVE.prefix_attention(q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), hkv * d, d,
                             out.data_ptr(), 0, hkv, n * group, length, d, float(sm_scale),
                             first, group, hq * d, group * d, slots.data_ptr(),
                             k_cache.numel() // (hkv * d))
    return out


def _plain_rows(t: torch.Tensor) -> bool:
    """Contiguous float32 CPU rows ``[n, H, D]``: what the kernel reads and writes in place."""
    return (type(t) is torch.Tensor and t.dtype is _F32 and t.is_cpu and t.dim() == 3
            and t.is_contiguous())
