"""The one place that decides which kernel set (:class:`~radixlm.kernels.ops.KernelOps`) the
model runner calls.

``auto`` picks Triton on CUDA devices; on the CPU it picks the native set
(:data:`~radixlm.kernels.cpu.ops.NATIVE_OPS`: the torch references with the per-token
kernels of a layer in C) when its module was built, else the torch references. ``torch``,
``native`` or ``triton`` force a choice. The runtime passes the name in (read from its config
and environment there): this package reads no environment itself.
"""

from __future__ import annotations

import torch

from .cpu.row_ops import row_ops_available
from .ops import KernelOps
from .reference.ops import TORCH_OPS

BACKENDS = ("auto", "torch", "native", "triton")


def resolve_backend(name: str, device: torch.device) -> str:
    """Map ``auto``/``torch``/``native``/``triton`` and a device to the backend that will run."""
    if name not in BACKENDS:
        raise ValueError(f"kernel backend must be one of {BACKENDS}, got {name!r}")
    if name == "native" and not row_ops_available():
        raise RuntimeError("kernel backend 'native' needs radixlm.kernels.cpu.native.row_ops: run "
                           "`python setup.py build_ext --inplace` (a C compiler), or use 'torch'")
    if name == "auto":
        if device.type == "cuda":
            return "triton"
        return "native" if device.type == "cpu" and row_ops_available() else "torch"
    return name


def get_kernel_ops(name: str, device: torch.device) -> KernelOps:
    """The kernels for ``name`` on ``device``."""
    resolved = resolve_backend(name, device)
    if resolved == "torch":
        return TORCH_OPS
    if resolved == "native":
        from .cpu.ops import NATIVE_OPS

        return NATIVE_OPS
    from .triton.ops import TRITON_OPS  # imported lazily: Triton is optional on CPU

    return TRITON_OPS
