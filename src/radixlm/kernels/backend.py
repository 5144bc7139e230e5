"""The one place that decides which kernel set (:class:`~radixlm.kernels.ops.KernelOps`) the
model runner calls.

``auto`` picks Triton on CUDA devices and the torch references elsewhere (the CPU path);
``torch`` or ``triton`` force a choice. The runtime passes the name in (read from its config
and environment there): this package reads no environment itself.
"""

from __future__ import annotations

import torch

from .ops import KernelOps
from .torch_ops import TORCH_OPS

BACKENDS = ("auto", "torch", "triton")


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
