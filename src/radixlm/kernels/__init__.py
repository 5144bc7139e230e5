"""Kernels: Triton implementations beside plain-PyTorch references (the CPU path).

This package imports nothing else of radixlm; its configuration comes in as arguments.
"""

from .backend import BACKENDS, get_kernel_ops, resolve_backend
from .decode_attention import DecodePlan, decode_attention_ref, plan_decode, plan_decode_padded
from .extend_attention import extend_attention_ref
from .kv_store import store_kv_ref
from .ops import KernelOps
from .rms_norm import fused_add_rms_norm_ref, rms_norm_ref
from .rotary import rotary_ref, rotary_rows, rotary_rows_ref
from .silu_mul import silu_mul_ref
from .token_bitmask import apply_token_bitmask_ref, unpack_bitmask
from .torch_ops import TORCH_OPS

__all__ = [
    "BACKENDS",
    "TORCH_OPS",
    "DecodePlan",
    "KernelOps",
    "apply_token_bitmask_ref",
    "decode_attention_ref",
    "extend_attention_ref",
    "fused_add_rms_norm_ref",
    "get_kernel_ops",
    "plan_decode",
    "plan_decode_padded",
    "resolve_backend",
    "rms_norm_ref",
    "rotary_ref",
    "rotary_rows",
    "rotary_rows_ref",
    "silu_mul_ref",
    "store_kv_ref",
    "unpack_bitmask",
]
