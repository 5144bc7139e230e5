"""float32 linear on AMX int8 tiles, each operand row as 24-bit fixed point: ``f32-amx-fx24``.

``y[m, n] = sum_k x[m, k] * weight[n, k]``, float32 in and out. Each row of ``x`` and of the
weight is written as integers ``V = round(v 2^e)`` with a per-row power of two (the row's
largest ``|V|`` in ``[XMAX / 2, XMAX]``), ``V`` in three balanced base-256 digits (s8 planes hi,
mid, lo); the kernel (``kernels/cpu/native/f32_amx_fx24_gemm.c``) sums the six digit products that
matter with ``TDPBSSD`` in int32, combines them in int64 and scales once in double. Error:
each operand's rounding to ~2^-23 of its row's largest element and the dropped low levels,
``|y - x.w| <= 2^-20 K max|x[m]| max|w[n]|`` plus half an ulp (on SmolLM2's rows ~1e-7 of
``sum |x w|``, a float32 dot product's own; ``docs/kernels.md``). Rows are independent: a
row's result does not depend on the other rows of the call.

The weight is packed once at load: 3 bytes a weight (float32's 4), so a decode step streams
a quarter fewer bytes, and AMX's int8 rate is twice its bfloat16 one
(:class:`F32AmxFx24Weight`; layout in the C file). :func:`f32_amx_fx24_reference` is the
same digit arithmetic in float64 (every partial sum exact there): the kernel equals it bit
for bit.

Needs the built module ``radixlm.kernels.cpu.native.f32_amx_fx24_gemm``, a CPU with AMX-INT8 and
AVX-512 F/BW/DQ/VL, and a Linux kernel that lets the process use AMX
(:func:`f32_amx_fx24_available`). The GIL is released while it runs; from 8 rows up a call
splits its column tiles over torch's thread count at the linear's construction
(:func:`threaded`; bit-identical results whatever the count).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..reference.checks import check_tensor
from .f32_linear import NativeF32Linear, checked_gemm
from .native import load, require, unavailable_reason
from .q4_gemv import PackArena

_NATIVE = load("f32_amx_fx24_gemm")
_NEEDS = "AMX-INT8 and AVX-512 F/BW/DQ/VL (and a kernel that grants AMX state)"
TILE_N, TILE_K = 16, 64  # output columns and k per packed unit (the C file's TN, TK)
MAX_K = 43690  # 3 K 128^2 < 2^31: a level's int32 sum cannot overflow (the C file's MAX_K)
XMAX = 8355711.0  # 127 (65536 + 256 + 1): the largest balanced 3-digit value
_F32, _F64 = torch.float32, torch.float64
_CPU = torch.device("cpu")


def f32_amx_fx24_available() -> bool:
    """True if the native module is built and this CPU and kernel can run it."""
    return not unavailable_reason(_NATIVE, "f32_amx_fx24_gemm", _NEEDS)


def f32_amx_fx24_supports(weight: torch.Tensor) -> bool:
    """True if the kernel is available and takes ``weight``: float32 on the CPU, finite, K at
    most :data:`MAX_K` (what :meth:`F32AmxFx24Weight.pack` would otherwise refuse)."""
    return (f32_amx_fx24_available() and weight.dtype == _F32 and weight.is_cpu
            and weight.dim() == 2 and weight.shape[1] <= MAX_K
            and bool(torch.isfinite(weight).all()))


def fixed_rows(t: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``[R, K]`` -> (``V`` float64 ``[R, K]`` integers, ``e`` int64 ``[R]``) with
    ``V = round(t 2^e)``: the row's largest ``|V|`` in ``[XMAX / 2, XMAX]``, ``e <= 126``, ``e = 0``
    for a zero row (the C file's ``row_exponent``)."""
    amax = t.abs().amax(1)
    _, ex = torch.frexp(amax)  # amax = f 2^ex, f in [0.5, 1)
    e = 23 - ex.to(torch.int64)
    e = e - (amax.to(_F64) * torch.pow(2.0, e.to(_F64)) > XMAX).to(torch.int64)
    e = torch.where(amax > 0, e, torch.zeros_like(e)).clamp(max=126)
    return torch.round(t.to(_F64) * torch.pow(2.0, e.to(_F64))[:, None]), e


def digit_planes(v: torch.Tensor) -> torch.Tensor:
    """Integers ``v`` (``|v| <= XMAX``, any float or int dtype) -> int64 ``[3, *v.shape]``:
    balanced base-256 digits hi, mid, lo in [-128, 127], ``v = 65536 hi + 256 mid + lo``."""
    rest = v.to(torch.int64)
    digits = []
    for _ in range(2):
        d = ((rest + 128) & 255) - 128
        digits.append(d)
        rest = (rest - d) >> 8
    return torch.stack([rest, digits[1], digits[0]])


def threaded(gemm: Callable[..., None]) -> Callable[..., None]:
    """The kernel entry with this thread's torch thread count bound: a call of 8 rows or more
    splits its column tiles over that many threads (the runner sets the count before it
    builds its linears; each linear keeps the count it was built under)."""
    return functools.partial(gemm, threads=torch.get_num_threads())


def check_packed(packed: torch.Tensor, out_features: int, in_features: int,
                 expected_bytes: int) -> None:
    """What every weight packed for ``amx_fx24_gemm`` states on construction: one contiguous
    CPU uint8 buffer of ``expected_bytes``, ``N >= 0`` and ``0 <= K <= MAX_K``."""
    check_tensor("packed", packed, ndim=1, dtypes=(torch.uint8,), device=_CPU,
                 contiguous=True)
    if not 0 <= in_features <= MAX_K or out_features < 0:
        raise ValueError(f"need N >= 0 and 0 <= K <= {MAX_K} (the int32 sums), got "
                         f"[{out_features}, {in_features}]")
    if packed.numel() != expected_bytes:
        raise ValueError(f"packed: expected {expected_bytes} bytes for a [{out_features}, "
                         f"{in_features}] weight, got {packed.numel()}")


def write_packed(units: torch.Tensor, row_values: torch.Tensor,
                 arena: PackArena | None) -> torch.Tensor:
    """``units`` (int8, the kernel's order) then ``row_values`` (float32, one a padded row)
    into one uint8 buffer, from ``arena`` when given."""
    split = units.numel()
    nbytes = split + 4 * row_values.numel()
    packed = arena.take(nbytes) if arena is not None else torch.empty(nbytes, dtype=torch.uint8)
    packed[:split].view(torch.int8).view(units.shape).copy_(units)
    packed[split:].view(_F32).copy_(row_values)
    return packed


def _packed_bytes(out_features: int, in_features: int) -> tuple[int, int, int]:
    tiles, blocks = -(-out_features // TILE_N), -(-in_features // TILE_K)
    return tiles, blocks, tiles * blocks * 3 * TILE_K * TILE_N + 4 * tiles * TILE_N


@dataclass(frozen=True)
class F32AmxFx24Weight:
    """A float32 weight ``[N, K]`` as ``packed`` bytes: the digit planes int8
    ``[ceil(N / 16), ceil(K / 64), 3, 16, 16, 4]`` (``[t, b, p, r, c, i]`` is plane ``p`` of
    ``weight[16t + c, 64b + 4r + i]``, zeros past ``N`` and ``K``) followed by each padded
    row's factor ``2^(16 - e)`` float32 (the kernel's level sum is ``X.W / 2^16``)."""

    packed: torch.Tensor
    out_features: int
    in_features: int

    def __post_init__(self) -> None:
        check_packed(self.packed, self.out_features, self.in_features,
                     _packed_bytes(self.out_features, self.in_features)[2])

    @classmethod
    def pack(cls, weight: torch.Tensor, arena: PackArena | None = None) -> F32AmxFx24Weight:
        """Packs a finite float32 CPU weight ``[N, K]`` (into ``arena`` when given: weights
        back to back in build order, which is the order a step reads them)."""
        check_tensor("weight", weight, ndim=2, dtypes=(_F32,), device=_CPU)
        if not bool(torch.isfinite(weight).all()):
            raise ValueError("weight: holds inf or nan; the fixed-point GEMM needs finite "
                             "weights (use another --cpu-gemm for this model)")
        n, k = weight.shape
        tiles, blocks, _ = _packed_bytes(n, k)
        if n == 0 or k == 0:  # nothing to multiply: the linear maps to zeros without a call
            v, e = weight.detach().to(_F64).new_zeros(n, k), torch.zeros(n, dtype=torch.int64)
        else:
            v, e = fixed_rows(weight.detach())
        v = F.pad(v, (0, blocks * TILE_K - k, 0, tiles * TILE_N - n))  # [N16, K64]
        planes = digit_planes(v).to(torch.int8)  # [3, N16, K64]
        units = planes.view(3, tiles, TILE_N, blocks, TILE_K // 4, 4).permute(1, 3, 0, 4, 2, 5)
        factor = F.pad(torch.pow(2.0, 16 - e.to(_F64)).to(_F32), (0, tiles * TILE_N - n),
                       value=1.0)
        return cls(write_packed(units, factor, arena), n, k)

    def planes(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(digit planes int64 ``[3, N, K]``, row factors ``2^(16 - e)`` float32 ``[N]``): the
        weight as the kernel sees it (for the reference and tests)."""
        tiles, blocks, nbytes = _packed_bytes(self.out_features, self.in_features)
        split = nbytes - 4 * tiles * TILE_N
        units = self.packed[:split].view(torch.int8).view(tiles, blocks, 3, TILE_K // 4,
                                                           TILE_N, 4)
        planes = units.permute(2, 0, 4, 1, 3, 5).reshape(3, tiles * TILE_N, blocks * TILE_K)
        factor = self.packed[split:].view(_F32)
        n, k = self.out_features, self.in_features
        return planes[:, :n, :k].to(torch.int64), factor[:n].clone()

    def unpack(self) -> torch.Tensor:
        """The weight's fixed-point values, float64 ``[N, K]``."""
        planes, factor = self.planes()
        v = planes[0] * 65536 + planes[1] * 256 + planes[2]
        return v.to(_F64) * (factor.to(_F64) / 65536)[:, None]


def f32_amx_fx24_gemm(x: torch.Tensor, weight: F32AmxFx24Weight) -> torch.Tensor:
    """``x`` float32 ``[M, K]`` (contiguous, CPU) times the packed weight transposed: float32
    ``[M, N]``; anything else raises before the kernel runs."""
    native = require(_NATIVE, "f32_amx_fx24_gemm", _NEEDS)
    return checked_gemm(native.gemm, x, weight.packed, weight.out_features, weight.in_features)


class F32AmxFx24Linear(NativeF32Linear):
    """``x @ weight.T`` on the fixed-point AMX GEMM, the weight packed once: ``[M, K] ->
    [M, N]`` float32. A contiguous float32 ``x`` goes straight to the kernel; anything else
    takes :func:`f32_amx_fx24_gemm`'s checked path."""

    __slots__ = ()

    def __init__(self, weight: torch.Tensor | F32AmxFx24Weight,
                 arena: PackArena | None = None) -> None:
        native = require(_NATIVE, "f32_amx_fx24_gemm", _NEEDS)
        packed = (weight if isinstance(weight, F32AmxFx24Weight)
                  else F32AmxFx24Weight.pack(weight, arena))
        gemm = threaded(native.gemm)
        super().__init__(packed, packed.packed, packed.out_features, packed.in_features,
                         gemm, lambda x: checked_gemm(gemm, x, packed.packed,
                                                      packed.out_features, packed.in_features))


def f32_amx_fx24_reference(x: torch.Tensor, weight: F32AmxFx24Weight) -> torch.Tensor:
    """Torch reference: the kernel's digit arithmetic in float64, where every level's sum is
    an exact integer (``|P| < 2^53``), then the same scaling and one rounding to float32; a
    row of ``x`` holding inf or nan gives nan."""
    check_tensor("x", x, ndim=2, dtypes=(_F32,), device=_CPU)
    finite = torch.isfinite(x).all(1)
    v, e = fixed_rows(torch.where(finite[:, None], x, torch.zeros_like(x)))
    xd = digit_planes(v).to(_F64)
    wd, factor = weight.planes()
    wd = wd.to(_F64)
    p0 = xd[0] @ wd[0].T
    p1 = xd[1] @ wd[0].T + xd[0] @ wd[1].T
    p2 = xd[2] @ wd[0].T + xd[1] @ wd[1].T + xd[0] @ wd[2].T
    t = p0 * 65536 + p1 * 256 + p2
    scale = torch.pow(2.0, -e.to(_F64))[:, None] * factor.to(_F64)[None, :]
    y = (t * scale).to(_F32)
    return torch.where(finite[:, None], y, torch.full_like(y, float("nan")))
