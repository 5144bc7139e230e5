"""Kernels, one package per backend behind one interface.

* :mod:`.ops` — :class:`KernelOps`, the record of callables the model layers call through;
  :mod:`.backend` — which set runs (``auto``/``torch``/``native``/``triton``).
* :mod:`.reference` — the torch references (the CPU path, every other backend's oracle, and
  the argument checks all launchers share); set ``TORCH_OPS``.
* :mod:`.triton` — the Triton kernels, one module per family named as its reference; set
  ``TRITON_OPS`` (imported lazily: Triton is optional on CPU).
* :mod:`.cpu` — the native CPU kernels (C sources in ``cpu/native/``, built by ``setup.py``)
  and the quantized weight formats; set ``NATIVE_OPS``.

This package imports nothing else of radixlm; its configuration comes in as arguments. The
names below are its public surface (the references and the choice of set).
"""

from .backend import BACKENDS, get_kernel_ops, resolve_backend
from .ops import KernelOps
from .reference.decode_attention import (
    DecodePlan,
    decode_attention_ref,
    plan_decode,
    plan_decode_padded,
)
from .reference.extend_attention import extend_attention_ref
from .reference.kv_store import store_kv_ref
from .reference.ops import TORCH_OPS
from .reference.rms_norm import fused_add_rms_norm_ref, rms_norm_ref
from .reference.rotary import rotary_ref, rotary_rows, rotary_rows_ref
from .reference.silu_mul import silu_mul_ref
from .reference.token_bitmask import apply_token_bitmask_ref, unpack_bitmask

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
