"""The one place that decides which implementation of each kernel the model runner calls.

``auto`` picks Triton on CUDA devices and the torch references elsewhere (the CPU path);
``torch`` or ``triton`` force a choice. The runtime passes the name in (read from its config
and environment there): this package reads no environment itself.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .decode_attention import decode_attention_ref
from .extend_attention import extend_attention_ref
from .kv_store import store_kv_ref
from .rms_norm import fused_add_rms_norm_ref, rms_norm_ref
from .rotary import rotary_ref
from .token_bitmask import apply_token_bitmask_ref

BACKENDS = ("auto", "torch", "triton")


@dataclass(frozen=True)
class KernelOps:
    """A consistent set of kernels; every field has the signature of its ``*_ref``."""

    name: str
    rms_norm: Callable[..., torch.Tensor]
    fused_add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    store_kv: Callable[..., None]
    decode_attention: Callable[..., torch.Tensor]
    extend_attention: Callable[..., torch.Tensor]
    apply_token_bitmask: Callable[..., None]


TORCH_OPS = KernelOps(
    name="torch",
    rms_norm=rms_norm_ref,
    fused_add_rms_norm=fused_add_rms_norm_ref,
    rotary=rotary_ref,
    store_kv=store_kv_ref,
    decode_attention=decode_attention_ref,
    extend_attention=extend_attention_ref,
    apply_token_bitmask=apply_token_bitmask_ref,
)


def resolve_backend(name: str, device: torch.device) -> str:
    """Map ``auto``/``torch``/``triton`` and a device to the backend that will run."""
    if name not in BACKENDS:
        raise ValueError(f"kernel backend must be one of {BACKENDS}, got {name!r}")
    if name == "auto":
        return "triton" if device.type == "cuda" else "torch"
    return name


def get_kernel_ops(name: str, device: torch.device) -> KernelOps:
    """The kernels for ``name`` on ``device``."""
    resolved = resolve_backend(name, device)
    if resolved == "torch":
        return TORCH_OPS
    from .triton_ops import TRITON_OPS  # imported lazily: Triton is optional on CPU

    return TRITON_OPS
