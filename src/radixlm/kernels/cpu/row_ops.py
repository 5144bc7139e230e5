"""A decoder layer's per-token kernels on the native ``row_ops`` module, for few-row CPU steps.

Each function takes the signature of its torch reference and returns the same result; on the
case it was built for (float32, contiguous, CPU, int64 slots) it is one C call on data
pointers, anything else goes to the reference unchanged (which checks and raises as ever).
Why: at batch-1 decode these ops work on a few hundred floats and each torch call they replace
costs microseconds of dispatch; 30 layers of ~25 calls were ~20% of a quantized step.

Numbers: :func:`rotary_rows` and :func:`store_kv` are bit-identical to the references;
:func:`fused_add_rms_norm` / :func:`rms_norm` sum the squares in another order,
:func:`decode_attention` computes its softmax with libm (the portable kernel) or a
polynomial e^x (the AVX-512 one, head sizes 64 and 128) and :func:`silu_mul` its e^x with a
polynomial of its own, as does :func:`gelu_tanh_mul` (~1e-7 relative; the AVX-512
attention ~1e-6; tested).

Decode attention reads each request's KV straight from the pool by slot, with no plan: the
set's :func:`plan_decode` answers ``None`` (take the native kernel) for small batches of short
contexts, where a plan's gathers and SDPA's setup cost more than the arithmetic, and the torch
plan otherwise (long contexts, and the shared-prefix cascade of large batches). With a cascade
plan the groups' prefixes go through :mod:`.avx512_attention` (one flash part per group,
torch's where that kernel is not built) and every request's own suffix through the native
kernel, which merges it into the prefix part by the
log-sum-exp: no suffix gather, no padded SDPA, no merge pass.
"""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType

import torch

from ..reference.decode_attention import (
    DecodePlan,
    decode_attention_ref,
    group_prefix_parts,
    plan_decode_padded,
)
from ..reference.kv_store import store_kv_ref
from ..reference.qk_norm_rotary import qk_norm_rotary_with
from ..reference.rms_norm import fused_add_rms_norm_ref, rms_norm_ref
from ..reference.rotary import rotary_rows_ref
from ..reference.silu_mul import gelu_tanh_mul_ref, silu_mul_ref
from .avx512_attention import prefix_partial_attention
from .native import load

_NATIVE = load("row_ops")
# decode attention for head sizes 64 / 128 on AVX-512 (native/avx512_attention.c: a KV head's
# query heads together, e^x 16 at a time; ~10x the portable row_ops kernel at 32 requests x
# 32 keys), the portable one otherwise
_AVX512 = load("avx512_attention")
AVX512_DECODE = _AVX512 is not None and bool(_AVX512.supported())
AVX512_HEAD_DIMS = (64, 128)
AVX512_MAX_GROUP = 64  # query heads per KV head the kernel's scratch holds
_F32, _I64 = torch.float32, torch.int64
# The native decode attention takes one request of any length, and batches whose padded KV
# (requests x longest) is at most this many tokens. Measured against the torch plan + SDPA
# (one thread, AVX-512, 9 query / 3 KV heads of 64): native 14 vs 51 us + a 150 us plan at
# 1 x 16, 416 vs 522 us + 170 at 1 x 2048, 86 vs 180 us + 120 at 8 x 64, 361 vs 513 us + 97 at
# 32 x 64. Past the bound the torch set's cascade may read a shared prefix once for a group
# where this kernel reads it per request, so the larger batches keep its plan. The rows of
# one request's speculative verification (one-token decodes over its slot row,
# scheduling/step_batch.py) take the native kernel at any length too, as its plain decode
# step does: with int8 activations (GGUF blocks) the plan's other rounding order flipped
# greedy tokens against plain decoding (SmolLM2, RAG row: 1 of 3 outputs identical).
NATIVE_DECODE_MAX_KV = 2048


def row_ops_available() -> bool:
    """True if the native module was built (it runs on any CPU)."""
    return _NATIVE is not None


def native_module() -> ModuleType | None:
    """The built ``row_ops`` module itself (its pointer entry points, which this module's
    functions wrap), or ``None``: for a caller binding the same calls once over buffers it
    keeps (``runtime/model/models/native_decode.py``)."""
    return _NATIVE


def decode_kernel(num_q_heads: int, num_kv_heads: int, head_dim: int) -> Callable[..., None]:
    """The native decode-attention entry point :func:`decode_attention` calls for these
    heads: the AVX-512 one for head sizes 64 / 128 where it runs, else ``row_ops``' (both
    take ``row_ops.decode_attention``'s arguments). Needs the native module."""
    if (AVX512_DECODE and head_dim in AVX512_HEAD_DIMS
            and num_q_heads // num_kv_heads <= AVX512_MAX_GROUP):
        return _AVX512.decode_attention
    return _NATIVE.decode_attention


def _plain(t: torch.Tensor) -> bool:
    """A float32 contiguous CPU tensor (a Parameter too): what the kernels read through a bare
    pointer."""
    return isinstance(t, torch.Tensor) and t.dtype is _F32 and t.is_cpu and t.is_contiguous()


def _norm_args_plain(x: torch.Tensor, weight: torch.Tensor) -> bool:
    return (_NATIVE is not None and _plain(x) and _plain(weight) and x.dim() == 2
            and weight.dim() == 1 and weight.shape[0] == x.shape[1] and x.numel() > 0)


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """:func:`rms_norm_ref` in one native call on float32 rows."""
    if not _norm_args_plain(x, weight):
        return rms_norm_ref(x, weight, eps)
    out = torch.empty_like(x)
    _NATIVE.add_rms_norm(x.data_ptr(), 0, weight.data_ptr(), out.data_ptr(), 0, x.shape[0],
                         x.shape[1], eps)
    return out


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor,
                       eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`fused_add_rms_norm_ref` (``(rms_norm(x + residual), x + residual)``)
    in one native call on float32 rows."""
    if not (_norm_args_plain(x, weight) and _plain(residual) and residual.shape == x.shape):
        return fused_add_rms_norm_ref(x, residual, weight, eps)
    out, summed = torch.empty_like(x), torch.empty_like(x)
    _NATIVE.add_rms_norm(x.data_ptr(), residual.data_ptr(), weight.data_ptr(), out.data_ptr(),
                         summed.data_ptr(), x.shape[0], x.shape[1], eps)
    return out, summed


def norm_add_rms_norm(x: torch.Tensor, pre_weight: torch.Tensor, residual: torch.Tensor,
                      weight: torch.Tensor, eps: float) -> tuple[torch.Tensor, torch.Tensor]:
    """``fused_add_rms_norm(rms_norm(x, pre_weight), residual, weight)`` (Gemma 3's
    post-attention norm, residual add and pre-MLP norm) in one native call on float32 rows,
    bit-identical to those two calls: one pass and one call instead of two."""
    if not (_norm_args_plain(x, weight) and _plain(pre_weight)
            and pre_weight.shape == weight.shape and _plain(residual)
            and residual.shape == x.shape):
        return fused_add_rms_norm(rms_norm(x, pre_weight, eps), residual, weight, eps)
    out, summed = torch.empty_like(x), torch.empty_like(x)
    _NATIVE.norm_add_rms_norm(x.data_ptr(), pre_weight.data_ptr(), residual.data_ptr(),
                              weight.data_ptr(), out.data_ptr(), summed.data_ptr(), x.shape[0],
                              x.shape[1], eps)
    return out, summed


def rotary_rows(qk: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """:func:`rotary_rows_ref` in one native call; ``qk`` [T, H, D] may be a view of
    the fused QKV rows (tokens strided, heads contiguous)."""
    if not (_NATIVE is not None and type(qk) is torch.Tensor and qk.dtype == _F32
            and qk.is_cpu and qk.dim() == 3 and qk.numel() > 0 and _plain(cos) and _plain(sin)):
        return rotary_rows_ref(qk, cos, sin)
    t, h, d = qk.shape
    if (cos.shape != (t, 1, d) or sin.shape != cos.shape or d % 2 or d < 2 or qk.stride(2) != 1
            or qk.stride(1) != d or (t > 1 and qk.stride(0) < h * d)):
        return rotary_rows_ref(qk, cos, sin)
    out = torch.empty(t, h, d)
    _NATIVE.rotary_rows(qk.data_ptr(), qk.stride(0) if t > 1 else h * d, cos.data_ptr(),
                        sin.data_ptr(), out.data_ptr(), t, h, d)
    return out


def qk_norm_rotary(qk: torch.Tensor, num_q_heads: int, q_weight: torch.Tensor,
                   k_weight: torch.Tensor, eps: float, cos: torch.Tensor, sin: torch.Tensor
                   ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`~radixlm.kernels.reference.qk_norm_rotary.qk_norm_rotary_ref` in one native
    call: this module's :func:`rms_norm` (of contiguous head rows) then :func:`rotary_rows`,
    bit-identical, each head normalised and rotated in L1 and written to contiguous ``q``
    and ``k`` (what the KV store and the attention take; a single key head's rows, strided in
    the QKV view, took torch's norm before: ~1e-7 apart). Other cases: those two functions
    one after the other."""
    t, h, d = qk.shape if qk.dim() == 3 else (0, 0, 0)
    if not (_NATIVE is not None and type(qk) is torch.Tensor and qk.dtype is _F32 and qk.is_cpu
            and t > 0 and 0 < num_q_heads < h and d % 2 == 0 and qk.stride(2) == 1
            and qk.stride(1) == d and (t == 1 or qk.stride(0) >= h * d)
            and all(_plain(w) and w.shape == (d,) for w in (q_weight, k_weight))
            and _plain(cos) and _plain(sin) and cos.shape == (t, 1, d) == sin.shape):
        return qk_norm_rotary_with(rms_norm, rotary_rows, qk, num_q_heads, q_weight, k_weight,
                                   eps, cos, sin)
    q, k = torch.empty(t, num_q_heads, d), torch.empty(t, h - num_q_heads, d)
    _NATIVE.qk_norm_rotary(qk.data_ptr(), qk.stride(0) if t > 1 else h * d,
                           q_weight.data_ptr(), k_weight.data_ptr(), cos.data_ptr(),
                           sin.data_ptr(), q.data_ptr(), k.data_ptr(), t, num_q_heads,
                           h - num_q_heads, d, eps)
    return q, k


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    """:func:`silu_mul_ref` (``silu(gate) * up`` of ``[T, 2 I]`` rows) in one native
    call, vectorized with its own e^x (~1e-7 relative to torch's)."""
    if not _gate_up_plain(x):
        return silu_mul_ref(x)
    return _act_mul(_NATIVE.silu_mul, x)


def gelu_tanh_mul(x: torch.Tensor) -> torch.Tensor:
    """:func:`gelu_tanh_mul_ref` (Gemma's ``gelu_tanh(gate) * up``) in one native call on the
    same e^x, as ``x / (1 + e^(-2u))`` (~1e-7 relative to torch's tanh form; 128 x 2048:
    ~0.5 ms for torch's gelu + mul)."""
    if not _gate_up_plain(x):
        return gelu_tanh_mul_ref(x)
    return _act_mul(_NATIVE.gelu_tanh_mul, x)


def _gate_up_plain(x: torch.Tensor) -> bool:
    """Fused gate | up rows ``[T, 2 I]`` the activation kernels read through a pointer."""
    return (_NATIVE is not None and _plain(x) and x.dim() == 2 and x.numel() > 0
            and x.shape[1] % 2 == 0)


def _act_mul(kernel: Callable[..., None], x: torch.Tensor) -> torch.Tensor:
    inter = x.shape[1] // 2
    out = torch.empty(x.shape[0], inter)
    kernel(x.data_ptr(), out.data_ptr(), x.shape[0], inter)
    return out


def store_kv(k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor,
             k: torch.Tensor, v: torch.Tensor) -> None:
    """:func:`store_kv_ref` (``cache[slots[i]] = new[i]``) in one native call; k and v may
    be token rows of a wider tensor (v's view of the fused QKV rows: no copy first)."""
    if not (_NATIVE is not None and _plain(k_cache) and _plain(v_cache) and _token_rows(k)
            and _token_rows(v) and type(slots) is torch.Tensor and slots.dtype == _I64
            and slots.is_cpu and slots.is_contiguous() and slots.dim() == 1
            and k_cache.dim() == 4 and v_cache.shape == k_cache.shape
            and k.shape == v.shape and k.shape[0] == slots.shape[0] and k.numel() > 0
            and k.shape[1:] == k_cache.shape[2:]):
        store_kv_ref(k_cache, v_cache, slots, k, v)
        return
    row, tokens = k_cache.shape[2] * k_cache.shape[3], k.shape[0]
    _NATIVE.store_kv(k_cache.data_ptr(), v_cache.data_ptr(), k_cache.numel() // max(row, 1),
                     slots.data_ptr(), k.data_ptr(), v.data_ptr(), tokens, row,
                     k.stride(0) if tokens > 1 else row, v.stride(0) if tokens > 1 else row)


def _token_rows(t: torch.Tensor) -> bool:
    """float32 CPU ``[T, H, D]`` whose rows are contiguous ``H * D`` floats, ``stride(0)``
    apart (a contiguous tensor, or a slice of wider rows)."""
    return (isinstance(t, torch.Tensor) and t.dtype is _F32 and t.is_cpu and t.dim() == 3
            and t.stride(2) == 1 and t.stride(1) == t.shape[2]
            and (t.shape[0] <= 1 or t.stride(0) >= t.shape[1] * t.shape[2]))


def plan_decode(slots: torch.Tensor, lens: torch.Tensor, page_size: int = 1,
                sliding_window: int = 0,
                workspace: dict[str, torch.Tensor] | None = None) -> DecodePlan | None:
    """``None`` (the native kernel, no plan) for one request (or one request's verify
    rows) or a batch of at most :data:`NATIVE_DECODE_MAX_KV` padded KV tokens on the CPU, else
    :func:`plan_decode_padded`'s plan for the torch reference."""
    batch = lens.shape[0]
    if (_NATIVE is not None and batch > 0 and slots.is_cpu
            and (batch == 1 or batch * int(lens.max()) <= NATIVE_DECODE_MAX_KV
                 or _one_request(slots, lens))):
        return None
    return plan_decode_padded(slots, lens, page_size, sliding_window, workspace)


def _one_request(slots: torch.Tensor, lens: torch.Tensor) -> bool:
    """Whether every row is one request's (a verification's rows): they hold one slot at
    the shortest row's last position, which is that row's newest token, no other
    request's."""
    last = int(lens.min()) - 1
    return last >= 0 and bool((slots[:, last] == slots[0, last]).all())


def decode_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                     kv_indptr: torch.Tensor, kv_indices: torch.Tensor, sm_scale: float,
                     logit_cap: float = 0.0, sliding_window: int = 0,
                     plan: DecodePlan | None = None) -> torch.Tensor:
    """:func:`decode_attention_ref`; on float32 CPU tensors and int64
    indices, without a ``plan`` one native call reading the pool by slot; with a cascade plan
    the shared prefixes by :func:`group_prefix_parts` and each request's
    suffix by that native call, merged into the prefix part (no suffix gather, no merge
    pass)."""
    plain = _decode_args_plain(q, k_cache, v_cache, kv_indptr, kv_indices)
    if plain and plan is not None and plan.groups and plan.suffix_indices is not None:
        o_p, l_p = group_prefix_parts(q, k_cache, v_cache, plan, sm_scale, logit_cap,
                                      prefix_partial_attention)
        b, hq, d = q.shape
        out = o_p.reshape(b, hq, d).contiguous()  # the prefix part, merged into in place
        lse = l_p.reshape(b, hq).contiguous()
        _native_decode(q, k_cache, v_cache, plan.suffix_indptr, plan.suffix_indices, out,
                       0, lse.data_ptr(), sm_scale, logit_cap)
        return out
    if plan is not None or not plain:
        return decode_attention_ref(q, k_cache, v_cache, kv_indptr, kv_indices, sm_scale,
                                    logit_cap, sliding_window, plan)
    out = torch.empty(q.shape)
    _native_decode(q, k_cache, v_cache, kv_indptr, kv_indices, out, sliding_window, 0,
                   sm_scale, logit_cap)
    return out


def _native_decode(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                   indptr: torch.Tensor, indices: torch.Tensor, out: torch.Tensor,
                   sliding_window: int, prior_lse: int, sm_scale: float,
                   logit_cap: float) -> None:
    """The native call: ``out`` [B, Hq, D] = attention over ``indices[indptr[b]:...]``,
    merged into ``out``'s prior part when ``prior_lse`` (a pointer to [B, Hq]) is not 0."""
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    decode_kernel(hq, hkv, d)(
        q.data_ptr(), k_cache.data_ptr(), v_cache.data_ptr(), k_cache.numel() // (hkv * d),
        indptr.data_ptr(), indices.data_ptr(), indices.shape[0], out.data_ptr(), b, hq, hkv, d,
        sliding_window, prior_lse, float(sm_scale), float(logit_cap))


def _decode_args_plain(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       kv_indptr: torch.Tensor, kv_indices: torch.Tensor) -> bool:
    """The native decode kernel's case; anything else is the reference's to check."""
    if not (_NATIVE is not None and _plain(q) and _plain(k_cache) and _plain(v_cache)
            and q.dim() == 3 and k_cache.dim() == 4 and v_cache.shape == k_cache.shape
            and q.shape[0] > 0 and k_cache.shape[3] == q.shape[2]
            and q.shape[1] % k_cache.shape[2] == 0):
        return False
    return all(type(t) is torch.Tensor and t.dtype == _I64 and t.is_cpu and t.dim() == 1
               and t.is_contiguous() for t in (kv_indptr, kv_indices)) \
        and kv_indptr.shape[0] == q.shape[0] + 1
