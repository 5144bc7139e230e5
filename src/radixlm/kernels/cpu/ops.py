"""The native CPU kernel set: the torch references with a decoder layer's per-token kernels
(norms, rotary, QK-norm + rotary, SiLU / tanh-GELU * up, KV store, short-context decode
attention) on the native ``row_ops`` module, grammar bitmasks applied by the native
``token_bitmask`` module (numpy where it is not built: :mod:`.token_bitmask`), and the
AVX-512 attention kernels where they run (shared prefixes and decode by slot in
:mod:`.row_ops`, a request's own causal keys in extend attention).

Offered only when that module was built (:func:`~.row_ops.row_ops_available`); each of its
kernels hands any case it was not built for to the torch reference, so the set computes what
:data:`~radixlm.kernels.reference.ops.TORCH_OPS` computes (bit-identical rotary and store,
~1e-7 relative norms and attention) with one C call where torch makes several.
"""

from __future__ import annotations

from dataclasses import replace

from ..reference.extend_attention import extend_attention_with
from ..reference.ops import TORCH_OPS
from . import row_ops
from .avx512_attention import causal_prefill_by_slot
from .token_bitmask import apply_token_bitmask_cpu

NATIVE_OPS = replace(
    TORCH_OPS,
    name="native",
    rms_norm=row_ops.rms_norm,
    fused_add_rms_norm=row_ops.fused_add_rms_norm,
    norm_add_rms_norm=row_ops.norm_add_rms_norm,
    store_kv=row_ops.store_kv,
    plan_decode=row_ops.plan_decode,
    decode_attention=row_ops.decode_attention,
    rotary_rows=row_ops.rotary_rows,
    silu_mul=row_ops.silu_mul,
    gelu_tanh_mul=row_ops.gelu_tanh_mul,
    qk_norm_rotary=row_ops.qk_norm_rotary,
    # a request's own causal keys on the AVX-512 flash kernel (the rest: torch's path)
    extend_attention=extend_attention_with(causal_prefill_by_slot),
    # masked AVX-512 stores of -inf, not torch's int32 unpack (the same bits: token_bitmask.py)
    apply_token_bitmask=apply_token_bitmask_cpu,
)
