"""Host-side helpers shared by the Triton launchers: launch preconditions and tile sizes.

Triton runs kernels on CUDA tensors, or on CPU tensors when its interpreter was switched on
(``TRITON_INTERPRET=1``) before the kernel modules were imported. Which of the two a kernel
object is tells us that, so nothing here reads the environment.
"""

from __future__ import annotations

import torch
import triton
from triton.runtime.interpreter import InterpretedFunction


def is_interpreted(kernel: object) -> bool:
    """Whether ``kernel`` (a ``@triton.jit`` function) runs in Triton's CPU interpreter."""
    return isinstance(kernel, InterpretedFunction)


def check_launchable(name: str, t: torch.Tensor, kernel: object) -> None:
    """Raise before launch when ``kernel`` cannot run on the device holding ``t``."""
    if t.device.type == "cuda" or (t.device.type == "cpu" and is_interpreted(kernel)):
        return
    if t.device.type == "cpu":
        raise ValueError(
            f"{name}: the Triton kernels need CUDA tensors, got one on cpu (use the torch "
            "kernel backend on CPU, or set TRITON_INTERPRET=1 before importing them)"
        )
    raise ValueError(f"{name}: the Triton kernels need CUDA tensors, got one on {t.device}")


def check_same_device(ref_name: str, ref: torch.Tensor, **others: torch.Tensor | None) -> None:
    """Raise unless every tensor in ``others`` sits on exactly ``ref``'s device (index too)."""
    for name, t in others.items():
        if t is not None and t.device != ref.device:
            raise ValueError(
                f"{name}: expected a tensor on {ref.device} (the device of {ref_name}), "
                f"got one on {t.device}"
            )


def check_unit_inner_stride(name: str, t: torch.Tensor) -> None:
    """Kernels index rows by stride but read each row's last dim as one contiguous run."""
    if t.ndim and t.shape[-1] > 1 and t.stride(-1) != 1:
        raise ValueError(
            f"{name}: expected the last dimension to be contiguous (stride 1), "
            f"got strides {tuple(t.stride())}"
        )


def check_out(name: str, out: torch.Tensor, shape: tuple[int, ...], like: torch.Tensor,
              dtype: torch.dtype | None = None) -> None:
    """A caller-provided output buffer: exact shape, dtype and device, contiguous."""
    dtype = like.dtype if dtype is None else dtype
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(out).__name__}")
    if tuple(out.shape) != shape or out.dtype != dtype or out.device != like.device:
        raise ValueError(
            f"{name}: expected shape {shape}, dtype {dtype} on {like.device}; "
            f"got shape {tuple(out.shape)}, dtype {out.dtype} on {out.device}"
        )
    if not out.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous tensor")


def on_gpu(device: torch.device) -> bool:
    """Whether launches for tensors on ``device`` compile for a GPU (else: the interpreter).

    Launchers tune for the GPU through this one function (tools that compile kernels for a
    GPU from CPU stand-in tensors replace it).
    """
    return device.type == "cuda"


def low_precision_dot(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether ``tl.dot`` gets half-precision operands (tensor cores) instead of float32.

    On a GPU, fp16/bf16 inputs go to the dot as they are. In the interpreter (CPU tensors)
    half-precision arithmetic is wrong, so every value is widened to float32 after its load.
    """
    return on_gpu(device) and dtype != torch.float32


def next_pow2(n: int) -> int:
    """Smallest power of two >= n (tile sizes must be powers of two)."""
    return triton.next_power_of_2(max(int(n), 1))


def num_sms(device: torch.device) -> int:
    """Streaming multiprocessors of a CUDA device; a small stand-in for the interpreter."""
    if device.type != "cuda":
        return 4
    return torch.cuda.get_device_properties(device).multi_processor_count
