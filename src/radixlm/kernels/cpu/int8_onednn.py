"""int8 per output channel through oneDNN's u8 x s8 GEMM, float32 activations as three bytes.

The weight is :class:`~.quant_linear.Int8Weight` (``w[n, k] = codes[n, k] * scales[n]``),
prepacked once by ``onednn::qlinear_prepack`` into oneDNN's blocked layout; a call runs
``onednn::qlinear_pointwise`` (VNNI/AMX integer dot products with int32 sums, then the float32
scales). Why: at batch 1 a step streams every weight from L3, and torch's
``_weight_int8pack_mm`` (and the int4 kernel) reach ~6 GB/s there on one core (they keep up in
L2, not from L3: rows of 576 bytes are too short for the prefetcher), while the packed layout
is read as one sequential stream: ~2x faster on SmolLM2's MLP and LM head shapes.

oneDNN wants 8-bit activations with one scale and zero point per tensor, so a float32 ``x``
``[M, K]`` goes as three rows of bytes per row, a base-256 fixed-point number with 24 bits:
``t = max|x|``, ``v = round(x * 127 * 2^16 / t)`` in ``[-127 * 2^16, 127 * 2^16]`` and
``v + 128 (2^16 + 2^8 + 1) = u`` in ``[0, 2^24)``, whose little-endian bytes ``b0, b1, b2``
satisfy ``v = (b2 - 128) 2^16 + (b1 - 128) 2^8 + (b0 - 128)``: zero point 128 for every row.
The kernel's int32 sums of each byte plane are exact (``|b - 128| <= 128``, ``|code| <= 127``,
``K`` up to 2^17), and ``y = y_2 + y_1 / 2^8 + y_0 / 2^16`` with the byte planes' outputs
``y_j`` in float32 (x scale ``t / 127``). The only rounding beside float32's is ``v``'s, half a
step of ``t / (127 * 2^16)``: about float32's own precision for the largest activation
(bfloat16 halves keep 16 bits relative to each element, and round each output to bfloat16).
At batch 1 the three rows cost what one does (the kernel streams the weight once). The scale
is per call, so a row's rounding depends on the largest activation of its batch (~1e-7).
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import torch

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor
from .quant_linear import Int8Weight

_ZERO_POINT = 128  # every byte plane's: b - 128 in [-128, 127]
_TOP = 127 * 2**16  # |v| <= _TOP for the largest |x| of the call
_OFFSET = _ZERO_POINT * (2**16 + 2**8 + 1)  # u = v + _OFFSET has bytes b0, b1, b2 (b3 = 0)
_BYTES = 3
# y_2 + y_1 / 2^8 + y_0 / 2^16 as one [1, 3] x [3, M * N] product (planes stored b0, b1, b2)
_PLANE_WEIGHTS = torch.tensor([[2.0**-16, 2.0**-8, 1.0]])
_HALF_OFFSET = torch.tensor(_OFFSET + 0.5)  # float32 (+ 0.5: truncation then rounds)
_TINY = 2.0**-100  # an all-zero x: any scale (this one keeps _TOP / top finite), every v is 0


def onednn_int8_available() -> bool:
    """True if torch has oneDNN's quantized linear ops and bytes are little-endian."""
    ops = torch.ops.onednn
    return (sys.byteorder == "little" and torch.backends.mkldnn.is_available()
            and all(hasattr(ops, n) for n in ("qlinear_prepack", "qlinear_pointwise")))


@dataclass(frozen=True)
class OnednnInt8Weight:
    """An :class:`Int8Weight` prepacked for oneDNN (``packed``, opaque); ``scales`` float32
    ``[N]``; ``zero_points`` the weight's (zeros, int64 ``[N]``). Build with :meth:`pack`."""

    packed: torch.Tensor
    scales: torch.Tensor
    zero_points: torch.Tensor
    shape: tuple[int, int]

    @classmethod
    def pack(cls, weight: Int8Weight) -> OnednnInt8Weight:
        """Prepack ``weight``'s codes (a copy: the codes can be dropped afterwards)."""
        if not isinstance(weight, Int8Weight):
            raise TypeError(f"weight: expected an Int8Weight, got {type(weight).__name__}")
        n, k = weight.shape
        if k > 2**17:  # int32 sums of 128 * 127 per term stay exact up to here
            raise ValueError(f"in_features {k} exceeds 2^17, where the int32 sums could overflow")
        packed = torch.ops.onednn.qlinear_prepack(weight.codes, None)
        return cls(packed, weight.scales, torch.zeros(n, dtype=torch.int64), (n, k))


def activation_bytes(x: torch.Tensor) -> tuple[torch.Tensor, float]:
    """float32 ``x`` ``[M, K]`` -> (uint8 byte planes ``[3 M, K]``: all rows' ``b0``, then
    ``b1``, then ``b2``; the scale of ``b2``'s unit, ``max|x| / 127``)."""
    top = max(torch.linalg.vector_norm(x, float("inf")).item(), _TINY)
    if not math.isfinite(top):  # an inf/nan in x: no fixed point holds it (the caller's nan)
        return torch.full((_BYTES * x.shape[0], x.shape[1]), _ZERO_POINT, dtype=torch.uint8), top
    # + 0.5 then truncation toward zero rounds (u >= 98432 > 0); u < 2^24 fits float32's
    # mantissa. Python scalars keep this at a few ops (a decode step makes ~120 such calls)
    u = torch.add(_HALF_OFFSET, x, alpha=_TOP / top).to(torch.int32)
    # little-endian bytes [M, K, 4] read as planes [3, M, K] (b3 = 0 dropped), one copy: a
    # strided view of one row is what oneDNN reads ~2x slower
    m, k = x.shape
    planes = u.view(torch.uint8).as_strided((_BYTES, m, k), (1, 4 * k, 4)).contiguous()
    return planes.view(_BYTES * m, k), top / 127


def int8_onednn_linear(x: torch.Tensor, weight: OnednnInt8Weight) -> torch.Tensor:
    """``x @ (codes * scales).T`` through oneDNN: ``[M, K] -> [M, N]`` in ``x``'s dtype."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    n, k = weight.shape
    check_dim("x", x, 1, k)
    m = x.shape[0]
    planes, x_scale = activation_bytes(x.to(torch.float32))
    if not math.isfinite(x_scale):  # as F.linear would
        return torch.full((m, n), float("nan"), dtype=x.dtype)
    # the float-scale overload: the tensor one measured ~30% slower (0.20 vs 0.157 ms, 3072x576)
    y = torch.ops.onednn.qlinear_pointwise(
        planes, x_scale, _ZERO_POINT, weight.packed, weight.scales, weight.zero_points, None,
        1.0, 0, torch.float32, "none", [], "")  # [3 M, N]: x_scale * scales * int32 sums
    return torch.mm(_PLANE_WEIGHTS, y.view(_BYTES, m * n)).view(m, n).to(x.dtype)



def int8_onednn_reference(x: torch.Tensor, weight: Int8Weight) -> torch.Tensor:
    """Torch reference: ``x`` rounded as :func:`activation_bytes` rounds it, times the
    dequantized weight in float64 (the kernel's int32 sums are exact), in ``x``'s dtype."""
    xf = x.to(torch.float64)
    top = xf.abs().max().clamp_min(_TINY)
    v = torch.round(xf * (_TOP / top)) * (top / _TOP)  # the 24-bit fixed-point activation
    return (v @ weight.codes.to(torch.float64).T * weight.scales.to(torch.float64)).to(x.dtype)
