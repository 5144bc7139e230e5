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
scalar fallback, 10-300x slower here), and they want the scales in the activation dtype.

* **int8 stays float32-faithful**: the launcher splits ``x`` into two bfloat16 halves, ``hi =
  bf16(x)`` and ``lo = bf16(x - hi)`` (16 bits of mantissa between them), multiplies both in
  one call (2M rows: at decode the kernel streams the weight once either way), passes unit
  scales and applies the float32 per-channel scales to the float32 sum of the two outputs.
  What is left is each half's output rounded to bfloat16. On SmolLM2-135M this moved int8
  perplexity from +1.66% of float32 (activations, scales and output all bf16; the scales alone
  cost +1.3%: a per-channel error repeated on every token) to +0.49%, inside the 1% bound;
  dequantize-then-``F.linear`` is +0.75% (the int8 weights themselves).
* **int4** runs on ``x`` rounded to bfloat16 with the scales and zeros rounded to bfloat16
  (2^-9 relative: small beside int4's own rounding step, the same order as llama.cpp's 8-bit
  activation quantization in its Q4/Q8 dot products, but it means the fast path is not
  bit-faithful to a GGUF's float16 scales; the dequantizing path is, to float32 rounding).

For more rows dequantizing and calling ``F.linear`` is faster; :func:`int8_blocked_linear`
does it one block of output rows at a time into a buffer that stays in cache (the float32
weight never goes to memory: 8-32 rows here), and the caller chooses by measurement.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor

INT4_GROUP_SIZES = (32, 64, 128)
_INT4_N_ALIGN = 16  # _convert_weight_to_int4pack_for_cpu requires N % 16 == 0
_KERNEL_DTYPE = torch.bfloat16
INT8_BLOCK_ROWS = 256  # rows dequantized at a time: 256 x K=576 float32 is 576 KiB (in L2)


def quant_kernels_available() -> bool:
    """True if this torch build has both weight-only CPU kernels."""
    ops = torch.ops.aten
    return all(hasattr(ops, n) for n in ("_weight_int8pack_mm", "_weight_int4pack_mm_for_cpu",
                                         "_convert_weight_to_int4pack_for_cpu"))


# -- int8 per output channel ---------------------------------------------------------------
@dataclass(frozen=True)
class Int8Weight:
    """codes int8 ``[N, K]``; scales float32 ``[N]`` (``unit``: the kernel's bf16 ones ``[N]``)."""

    codes: torch.Tensor
    scales: torch.Tensor
    unit: torch.Tensor = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        check_tensor("codes", self.codes, ndim=2, dtypes=(torch.int8,))
        check_tensor("scales", self.scales, ndim=1, dtypes=(torch.float32,))
        check_dim("scales", self.scales, 0, self.codes.shape[0])
        # the kernel scales in bfloat16; ours are applied after it, in float32
        object.__setattr__(self, "unit", torch.ones_like(self.scales, dtype=_KERNEL_DTYPE))

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
    """``x @ weight.dequantize().T`` via ``_weight_int8pack_mm``; x ``[M, K]`` -> ``[M, N]``.

    A float32 ``x`` runs as its bfloat16 ``hi``/``lo`` halves stacked ``[2M, K]`` (module
    docstring); the result is ``(y_hi + y_lo) * scales`` in float32.
    """
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    check_dim("x", x, 1, weight.shape[1])
    m, n = x.shape[0], weight.shape[0]
    if x.dtype == _KERNEL_DTYPE:  # no low half to keep
        y = torch.ops.aten._weight_int8pack_mm(x.contiguous(), weight.codes, weight.unit)
        return (y.to(torch.float32) * weight.scales).to(x.dtype)
    hi = x.to(_KERNEL_DTYPE)
    halves = torch.cat([hi, (x - hi.to(x.dtype)).to(_KERNEL_DTYPE)])  # [2M, K]
    y = torch.ops.aten._weight_int8pack_mm(halves, weight.codes, weight.unit)
    return y.view(2, m, n).sum(0, dtype=torch.float32).mul_(weight.scales).to(x.dtype)


def int8_blocked_linear(x: torch.Tensor, weight: Int8Weight,
                        block_rows: int = INT8_BLOCK_ROWS) -> torch.Tensor:
    """``x @ weight.dequantize().T`` in ``x``'s dtype, exactly (no bfloat16 anywhere): each
    block of ``block_rows`` output channels is converted into one reused buffer and
    multiplied, and the per-channel scales are applied to the ``[M, N]`` result."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    check_dim("x", x, 1, weight.shape[1])
    if block_rows < 1:
        raise ValueError(f"block_rows must be >= 1, got {block_rows}")
    n, k = weight.shape
    out = torch.empty(x.shape[0], n, dtype=x.dtype)
    buf = torch.empty(min(block_rows, n), k, dtype=x.dtype)
    for start in range(0, n, block_rows):
        stop = min(start + block_rows, n)
        block = buf[: stop - start]
        block.copy_(weight.codes[start:stop])
        out[:, start:stop] = F.linear(x, block)
    return out.mul_(weight.scales.to(x.dtype))


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
        # in place on one float32 copy: the same three roundings as ``(q - 8) * s + z`` out of
        # place (tested), measured 18x faster (the broadcast ops on fresh temporaries were
        # two thirds of a 512-row dequantize-then-F.linear)
        w = self.codes.to(torch.float32).sub_(8.0).view(n, k // g, g)
        w.mul_(self.scales[:, :, None]).add_(self.zeros[:, :, None])
        return w.view(n, k).to(dtype)


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
    return (y if y.shape[1] == n else y[:, :n]).to(x.dtype)  # N padded to 16: drop the pad


def quant_linear_reference(x: torch.Tensor, weight: Int8Weight | Int4Weight) -> torch.Tensor:
    """Torch reference of both launchers, with the kernels' roundings made explicit.

    int8: each bfloat16 half of ``x`` times the codes, rounded to bfloat16, summed and scaled
    in float32. int4: activations, scales and zeros in bfloat16 and a bfloat16 output (torch's
    CPU kernels require the scale table in the activation dtype); each sum itself is float32.
    """
    def bf16(t: torch.Tensor) -> torch.Tensor:
        return t.to(_KERNEL_DTYPE).to(torch.float32)

    if isinstance(weight, Int8Weight):
        codes = weight.codes.to(torch.float32)
        hi = bf16(x)
        y = bf16(F.linear(hi, codes)) + bf16(F.linear(bf16(x - hi), codes))
        return (y * weight.scales).to(x.dtype)
    rounded = Int4Weight(weight.codes, bf16(weight.scales), bf16(weight.zeros),
                         weight.group_size, weight.packed, weight.scale_zeros)
    w = rounded.dequantize(torch.float32)
    return bf16(F.linear(bf16(x), w)).to(x.dtype)
