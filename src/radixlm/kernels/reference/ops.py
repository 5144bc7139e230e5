"""The torch reference kernel set (the CPU path, and the oracle for the Triton kernels)."""

from __future__ import annotations

from ..ops import KernelOps
from .decode_attention import decode_attention_ref, plan_decode_padded
from .extend_attention import extend_attention_ref
from .kv_store import store_kv_ref
from .rms_norm import fused_add_rms_norm_ref, rms_norm_ref
from .rotary import rotary_ref, rotary_rows_ref
from .silu_mul import gelu_tanh_mul_ref, silu_mul_ref
from .token_bitmask import apply_token_bitmask_ref

# plan_decode_padded finds shared-prefix groups, so decode on this set runs cascade attention
# over prefixes that several requests share (a radix-cache hit).
TORCH_OPS = KernelOps(
    name="torch",
    rms_norm=rms_norm_ref,
    fused_add_rms_norm=fused_add_rms_norm_ref,
    rotary=rotary_ref,
    store_kv=store_kv_ref,
    plan_decode=plan_decode_padded,
    decode_attention=decode_attention_ref,
    extend_attention=extend_attention_ref,
    apply_token_bitmask=apply_token_bitmask_ref,
    rotary_rows=rotary_rows_ref,
    silu_mul=silu_mul_ref,
    gelu_tanh_mul=gelu_tanh_mul_ref,
)
