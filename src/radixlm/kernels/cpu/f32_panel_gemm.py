"""float32 linear for decode-sized batches (8-64 rows) on a weight packed in panels.

``y[m, n] = sum_k x[m, k] * weight[n, k]``, float32 in, float32 accumulators, float32 out:
the product ``F.linear`` computes, each output one FMA chain over ``k`` in order (another
summation order than MKL's, ~1e-7 relative). The weight is packed once at load into panels of
48 output columns, ``[ceil(N / 48), K, 48]`` (:class:`F32PanelWeight`), which the kernel
(``kernels/cpu/native/f32_panel_gemm.c``) multiplies into 8 rows at a time from L2 while it
prefetches the next panel: at 32 rows a step is as much arithmetic as memory stream, and the
kernel keeps both going (SmolLM2-135M's 32-row linears streamed in model order: see the C
file and ``docs/kernels.md``).

Needs the built module ``radixlm.kernels.cpu.native.f32_panel_gemm`` and a CPU with AVX-512 F
(:func:`f32_panel_gemm_available`). One thread; the GIL is released while it runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..reference.checks import check_tensor
from .f32_linear import NativeF32Linear, checked_gemm
from .native import load, require, unavailable_reason

_NATIVE = load("f32_panel_gemm")
_NEEDS = "AVX-512 F"  # what its supported() checks
PANEL = 48  # output columns per panel (the C file's NR)
_F32 = torch.float32
_CPU = torch.device("cpu")


def f32_panel_gemm_available() -> bool:
    """True if the native module is built and this CPU has the instructions it needs."""
    return not unavailable_reason(_NATIVE, "f32_panel_gemm", _NEEDS)


@dataclass(frozen=True)
class F32PanelWeight:
    """A float32 weight ``[N, K]`` packed as ``panels`` ``[ceil(N / 48), K, 48]``: panel
    ``p``, line ``k`` holds ``weight[48p : 48p + 48, k]``, zeros past ``N``."""

    panels: torch.Tensor
    out_features: int
    in_features: int

    def __post_init__(self) -> None:
        check_tensor("panels", self.panels, ndim=3, dtypes=(_F32,), device=_CPU,
                     contiguous=True)
        expected = (-(-self.out_features // PANEL), self.in_features, PANEL)
        if tuple(self.panels.shape) != expected:
            raise ValueError(f"panels: expected shape {expected} for a [{self.out_features}, "
                             f"{self.in_features}] weight, got {tuple(self.panels.shape)}")

    @classmethod
    def pack(cls, weight: torch.Tensor) -> F32PanelWeight:
        """Packs a float32 CPU weight ``[N, K]`` (a linear's, as torch stores it)."""
        check_tensor("weight", weight, ndim=2, dtypes=(_F32,), device=_CPU)
        n, k = weight.shape
        padded = F.pad(weight.detach(), (0, 0, 0, -n % PANEL))  # [ceil(N/48) * 48, K]
        panels = padded.view(padded.shape[0] // PANEL, PANEL, k).transpose(1, 2).contiguous()
        return cls(panels, n, k)

    def unpack(self) -> torch.Tensor:
        """The weight ``[N, K]`` back (for the reference and tests)."""
        rows = self.panels.shape[0] * PANEL
        return self.panels.transpose(1, 2).reshape(rows, self.in_features)[: self.out_features]


def f32_panel_gemm(x: torch.Tensor, weight: F32PanelWeight) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` (contiguous, CPU) times the packed weight transposed: float32
    ``[M, N]``; anything else raises before the kernel runs."""
    native = require(_NATIVE, "f32_panel_gemm", _NEEDS)
    return checked_gemm(native.gemm, x, weight.panels, weight.out_features, weight.in_features)


class F32PanelLinear(NativeF32Linear):
    """``x @ weight.T`` on the panel GEMM, the weight packed once: ``[M, K] -> [M, N]``
    float32. A contiguous float32 ``x`` goes straight to the kernel (a step makes ~120 such
    calls); anything else takes :func:`f32_panel_gemm`'s checked path."""

    __slots__ = ()

    def __init__(self, weight: torch.Tensor | F32PanelWeight) -> None:
        native = require(_NATIVE, "f32_panel_gemm", _NEEDS)
        packed = weight if isinstance(weight, F32PanelWeight) else F32PanelWeight.pack(weight)
        super().__init__(packed, packed.panels, packed.out_features, packed.in_features,
                         native.gemm, lambda x: f32_panel_gemm(x, packed))


def f32_panel_gemm_reference(x: torch.Tensor, weight: F32PanelWeight) -> torch.Tensor:
    """Torch reference: the same product in float64 on the unpacked weight, in float32."""
    return (x.to(torch.float64) @ weight.unpack().to(torch.float64).T).to(_F32)
