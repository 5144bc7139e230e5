"""The native CPU kernel set: the torch references with a decoder layer's per-token kernels
(norms, rotary, SiLU * up, KV store, short-context decode attention) on the native
``row_ops`` module, and the AVX-512 attention kernels where they run (shared prefixes and
decode by slot in :mod:`.cpu_row_ops`, a request's own causal keys in extend attention).

Offered only when that module was built (:func:`~.cpu_row_ops.row_ops_available`); each of its
kernels hands any case it was not built for to the torch reference, so the set computes what
:data:`~.torch_ops.TORCH_OPS` computes (bit-identical rotary and store, ~1e-7 relative norms
and attention) with one C call where torch makes several.
"""

from __future__ import annotations

from dataclasses import replace

from . import cpu_row_ops
from .cpu_prefix_attention import causal_prefill_attention
from .extend_attention import extend_attention_with
from .torch_ops import TORCH_OPS

NATIVE_OPS = replace(
    TORCH_OPS,
    name="native",
    rms_norm=cpu_row_ops.rms_norm,
    fused_add_rms_norm=cpu_row_ops.fused_add_rms_norm,
    store_kv=cpu_row_ops.store_kv,
    plan_decode=cpu_row_ops.plan_decode,
    decode_attention=cpu_row_ops.decode_attention,
    rotary_rows=cpu_row_ops.rotary_rows,
    silu_mul=cpu_row_ops.silu_mul,
    # a request's own causal keys on the AVX-512 flash kernel (the rest: torch's path)
    extend_attention=extend_attention_with(causal_prefill_attention),
)
