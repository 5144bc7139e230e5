"""The Triton kernel set, imported lazily by :func:`get_kernel_ops` (Triton is optional on CPU).

Each function has the signature of its ``*_ref`` counterpart (plus keyword-only extras such as
``out=``), so the model runner can swap the two sets freely.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from ..ops import KernelOps
from .decode_attention import decode_attention_triton, plan_decode_triton
from .extend_attention import extend_attention_triton
from .kv_store import store_kv_triton
from .rms_norm import fused_add_rms_norm_triton, rms_norm_triton
from .rotary import rotary_triton
from .token_bitmask import apply_token_bitmask_triton

KERNEL_MODULES = (
    "decode_attention", "extend_attention", "kv_store", "rms_norm", "rotary", "token_bitmask",
)

TRITON_OPS = KernelOps(
    name="triton",
    rms_norm=rms_norm_triton,
    fused_add_rms_norm=fused_add_rms_norm_triton,
    rotary=rotary_triton,
    store_kv=store_kv_triton,
    plan_decode=plan_decode_triton,
    decode_attention=decode_attention_triton,
    extend_attention=extend_attention_triton,
    apply_token_bitmask=apply_token_bitmask_triton,
)


def launched_kernels() -> list[tuple[ModuleType, str]]:
    """(module, name) of every ``@triton.jit`` function a launcher starts (names end in
    ``_kernel`` by convention; device helpers don't), for tools that intercept launches."""
    modules = [importlib.import_module(f"{__package__}.{name}") for name in KERNEL_MODULES]
    return [(m, name) for m in modules for name in vars(m) if name.endswith("_kernel")
            and name.startswith("_")]
