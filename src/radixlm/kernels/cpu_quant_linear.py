"""Weight-only quantized linears on CPU through torch's own kernels, beside torch references.

Two weight formats, both ``y = x @ dequant(W).T`` with ``W`` ``[N out, K in]``:

* **int8, one scale per output channel**: ``w[n, k] = codes[n, k] * scales[n]`` with codes in
  ``[-128, 127]``; run by ``aten._weight_int8pack_mm`` (which takes per-channel scales only).
* **int4 in groups of ``g`` along K** (32, 64 or 128): ``w[n, k] = (codes[n, k] - 8) *
  scale[n, k // g] + zero[n, k // g]`` with codes in ``[0, 15]`` -- torch's int4pack
  convention, checked numerically here; run by ``aten._weight_int4pack_mm_for_cpu`` on the
  weight packed by ``aten._convert_weight_to_int4pack_for_cpu`` (which wants ``N % 16 == 0``:
  we pad N with zero rows and slice the output).

Both torch kernels are fast only for bfloat16 activations on x86 (the float32 path is a
scalar fallback, 10-300x slower here), so the launchers run them on ``x`` rounded to bfloat16
and return ``x``'s dtype; the kernels also want the scales (and zeros) in the activation
dtype, so those are rounded to bfloat16 too (2^-9 relative: small beside int4's own rounding
step, the same order as llama.cpp's 8-bit activation quantization in its Q4/Q8 dot products,
but it means the fast path is not bit-faithful to a GGUF's float16 scales; the dequantizing
path below is, to float32 rounding). For many rows (prefill)
dequantizing once and calling ``F.linear`` is faster; the caller chooses by measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ._checks import FLOAT_DTYPES, check_dim, check_tensor

INT4_GROUP_SIZES = (32, 64, 128)
_INT4_N_ALIGN = 16  # _convert_weight_to_int4pack_for_cpu requires N % 16 == 0
_KERNEL_DTYPE = torch.bfloat16


def quant_kernels_available() -> bool:
    """True if this torch build has both weight-only CPU kernels."""
    ops = torch.ops.aten
    return all(hasattr(ops, n) for n in ("_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu",
                                         "_convert_weight_to_int4pack_for_cpu"))


# -- int8 per output channel ---------------------------------------------------------------
@dataclass(frozen=True)
class Int8Weight:
    """codes int8 ``[N, K]``; scales float32 ``[N]``."""

    codes: torch.Tensor
    scales: torch.Tensor

    def __post_init__(self) -> None:
        check_tensor("codes", self.codes, ndim=2, dtypes=(torch.int8,))
        check_tensor("scales", self.scales, ndim=1, dtypes=(torch.float32,))
        check_dim("scales", self.scales, 0, self.codes.shape[0])

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.codes.shape[0]), int(self.codes.shape[1])

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The float weight ``[N, K]`` these codes stand for (the torch reference)."""
        return (self.codes.to(torch.float32) * self.scales[:, None]).to(dtype)


def quantize_int8(w: torch.Tensor) -> Int8Weight:
    """Symmetric int8 per output channel: scale = max|w_n| / 127, codes = round(w / scale)."""
    check_tensor("w", w, ndim=2, dtypes=FLOAT_DTYPES)
    w = w.detach().to(torch.float32)
    scales = (w.abs().amax(dim=1) / 127.0).clamp_min(torch.finfo(torch.float32).tiny)
    codes = torch.round(w / scales[:, None]).clamp_(-127, 127).to(torch.int8)
    return Int8Weight(codes.contiguous(), scales.contiguous())


def int8_linear(x: torch.Tensor, weight: Int8Weight) -> torch.Tensor:
    """``x @ weight.dequantize().T`` via ``_weight_int8pack_mm``; x ``[M, K]`` -> ``[M, N]``."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    check_dim("x", x, 1, weight.shape[1])
    y = torch.ops.aten._weight_int8pack_mm(x.to(_KERNEL_DTYPE).contiguous(), weight.codes,
                                           weight.scales.to(_KERNEL_DTYPE))
    return y.to(x.dtype)


# -- int4 in groups along K ----------------------------------------------------------------
@dataclass(frozen=True)
class Int4Weight:
    """codes uint8 ``[N, K]`` in [0, 15]; scales, zeros float32 ``[N, K // group]``.

    ``packed`` is the kernel's layout (uint8 ``[N padded to 16, K / 2]``) and
    ``scale_zeros`` its ``[K // group, N padded, 2]`` table, built by :meth:`build`.
    """

    codes: torch.Tensor
    scales: torch.Tensor
    zeros: torch.Tensor
    group_size: int
    packed: torch.Tensor
    scale_zeros: torch.Tensor

    @classmethod
    def build(cls, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
              group_size: int) -> Int4Weight:
        """Validate codes/scales/zeros and pack them for the kernel."""
        check_tensor("codes", codes, ndim=2, dtypes=(torch.uint8,))
        n, k = codes.shape
        if group_size not in INT4_GROUP_SIZES:
            raise ValueError(f"group_size must be one of {INT4_GROUP_SIZES}, got {group_size}")
        if k % group_size:
            raise ValueError(f"in_features {k} is not a multiple of the group size {group_size}")
        for name, t in (("scales", scales), ("zeros", zeros)):
            check_tensor(name, t, ndim=2, dtypes=(torch.float32,))
            if tuple(t.shape) != (n, k // group_size):
                raise ValueError(f"{name}: expected shape {(n, k // group_size)}, "
                                 f"got {tuple(t.shape)}")
        if int(codes.max()) > 15:
            raise ValueError("codes: int4 codes must lie in [0, 15]")
        pad = -n % _INT4_N_ALIGN
        padded = F.pad(codes, (0, 0, 0, pad)).to(torch.int32)
        packed = torch.ops.aten._convert_weight_to_int4pack_for_cpu(padded.contiguous(), 1)
        table = torch.stack([F.pad(scales, (0, 0, 0, pad)), F.pad(zeros, (0, 0, 0, pad))], -1)
        return cls(codes.contiguous(), scales.contiguous(), zeros.contiguous(), group_size,
                   packed, table.transpose(0, 1).contiguous().to(_KERNEL_DTYPE))

    @property
    def shape(self) -> tuple[int, int]:
        return int(self.codes.shape[0]), int(self.codes.shape[1])

    def dequantize(self, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The float weight ``[N, K]`` (the torch reference of the kernel's convention)."""
        n, k = self.shape
        g = self.group_size
        q = (self.codes.to(torch.float32) - 8.0).reshape(n, k // g, g)
        w = q * self.scales[:, :, None] + self.zeros[:, :, None]
        return w.reshape(n, k).to(dtype)


def quantize_int4(w: torch.Tensor, group_size: int = 32) -> Int4Weight:
    """Asymmetric int4 per group of ``group_size`` along K (min/max over the group)."""
    check_tensor("w", w, ndim=2, dtypes=FLOAT_DTYPES)
    n, k = w.shape
    if group_size not in INT4_GROUP_SIZES or k % group_size:
        raise ValueError(f"in_features {k} must be a multiple of the group size "
                         f"{group_size} (one of {INT4_GROUP_SIZES})")
    g = w.detach().to(torch.float32).reshape(n, k // group_size, group_size)
    lo, hi = g.amin(-1), g.amax(-1)
    scales = ((hi - lo) / 15.0).clamp_min(torch.finfo(torch.float32).tiny)
    codes = torch.round((g - lo[..., None]) / scales[..., None]).clamp_(0, 15)
    zeros = lo + 8.0 * scales  # w = (c - 8) * s + zero  <=>  w = c * s + lo
    return Int4Weight.build(codes.reshape(n, k).to(torch.uint8), scales, zeros, group_size)


def int4_linear(x: torch.Tensor, weight: Int4Weight) -> torch.Tensor:
    """``x @ weight.dequantize().T`` via ``_weight_int4pack_mm_for_cpu``; ``[M, K] -> [M, N]``."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    n, k = weight.shape
    check_dim("x", x, 1, k)
    y = torch.ops.aten._weight_int4pack_mm_for_cpu(
        x.to(_KERNEL_DTYPE).contiguous(), weight.packed, weight.group_size, weight.scale_zeros)
    return y[:, :n].to(x.dtype)


def quant_linear_reference(x: torch.Tensor, weight: Int8Weight | Int4Weight) -> torch.Tensor:
    """Torch reference of both launchers, with the kernels' roundings made explicit.

    The kernels take activations, scales and zeros in bfloat16 and return bfloat16 (torch's
    CPU kernels require the scale table in the activation dtype); the sum itself is float32.
    """
    def bf16(t: torch.Tensor) -> torch.Tensor:
        return t.to(_KERNEL_DTYPE).to(torch.float32)

    if isinstance(weight, Int8Weight):
        w = weight.codes.to(torch.float32) * bf16(weight.scales)[:, None]
    else:
        rounded = Int4Weight(weight.codes, bf16(weight.scales), bf16(weight.zeros),
                             weight.group_size, weight.packed, weight.scale_zeros)
        w = rounded.dequantize(torch.float32)
    return bf16(F.linear(bf16(x), w)).to(x.dtype)
