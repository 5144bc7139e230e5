"""Grouped int4/int8 linears for a few rows on AVX-512 VNNI (``native/q4_gemv.c``).

Two weights with one float32 scale per group ``g`` of 32 along K:

* **int4**: ``w[n, k] = scale[n, g] * q[n, k] + min[n, g]``, codes ``q`` in [0, 15]: GGUF's Q4_0
  (``min = -8 scale``) and Q4_1 (``min = m``), and :class:`~.quant_linear.Int4Weight` with
  group 32 (``min = zero - 8 scale``);
* **int8**: ``w[n, k] = scale[n, g] * c[n, k]``, codes ``c`` in [-128, 127]: GGUF's Q8_0.

:class:`GroupedGemvWeight` lays the weight out once for the kernel: tiles of 16 output rows by
32 inputs (N padded to 16), the codes plus the group's scales (and mins), stored as float16
when every one of them is exactly a float16 (a GGUF's are), else as float32. Bytes per weight:
int4 0.625 (as GGUF's Q4_1 and torch's int4pack) or 0.75; int8 1.0625 (Q8_0's) or 1.125;
float32 weights take 4. A :class:`PackArena` puts successive weights back to back in large
chunks (on huge pages where the kernel allows): a decode step then streams one buffer in model
order, which the hardware prefetchers and the TLB handle better than ~120 separate allocations.

Numerics: each activation row becomes a 24-bit fixed-point integer with a per-row power-of-two
scale, multiplied in three 8-bit digit planes by VNNI integer dot products (exact), then one
float32 conversion per group; so the result differs from float32 ``x @ W.T`` by about 2^-24 of
the row's largest ``|x|`` times ``sum |w|`` (tested against the float64 product), unlike the
bfloat16 activations of torch's int4 kernel (2^-9 relative). int8 is as exact (the codes' +128
offset is undone per digit plane in integers). One call takes up to 8 rows per pass over the
weight; more rows run in passes of 8.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass

import torch

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor
from . import native

GROUP = 32
MAX_ROWS = 8  # rows per pass over the weight (the kernel's accumulators stay in registers)
_lib = native.load("q4_gemv")


def q4_gemv_available() -> bool:
    """True if the native kernel was built and this CPU has AVX-512 VNNI."""
    return _lib is not None and bool(_lib.supported())


def q4_gemv_unavailable_reason() -> str:
    """Why :func:`q4_gemv_available` is False (for skips and logs)."""
    if _lib is None:
        return ("radixlm.kernels.cpu.native.q4_gemv is not built "
                "(run `python setup.py build_ext --inplace` with a C compiler)")
    return "" if _lib.supported() else "this CPU lacks AVX-512 VNNI (avx512f/bw/vl/vnni)"


def _require() -> None:
    if not q4_gemv_available():
        raise RuntimeError(f"q4_gemv kernel unavailable: {q4_gemv_unavailable_reason()}")


def q4_gemv_lib():
    """The native module (also the per-channel int8 layout's, ``int8_vnni.py``), or a
    RuntimeError naming why it is unavailable."""
    _require()
    return _lib


class PackArena:
    """Hands out 64-byte aligned byte buffers back to back from chunks of ``chunk_bytes``
    (anonymous memory, advised onto huge pages). A buffer keeps its chunk alive."""

    ALIGN = 64

    def __init__(self, chunk_bytes: int = 64 << 20) -> None:
        if chunk_bytes < self.ALIGN:
            raise ValueError(f"chunk_bytes must be >= {self.ALIGN}, got {chunk_bytes}")
        self.chunk_bytes = chunk_bytes
        self._chunk: torch.Tensor | None = None
        self._used = 0

    def take(self, nbytes: int) -> torch.Tensor:
        """A fresh uint8 ``[nbytes]`` view, right after the previous one where it fits."""
        need = -(-nbytes // self.ALIGN) * self.ALIGN
        if self._chunk is None or self._used + need > self._chunk.numel():
            self._chunk, self._used = _huge_buffer(max(self.chunk_bytes, need)), 0
        view = self._chunk[self._used: self._used + nbytes]
        self._used += need
        return view


def _huge_buffer(nbytes: int) -> torch.Tensor:
    """uint8 ``[nbytes]`` on anonymous memory, advised onto transparent huge pages."""
    buf = mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    advice = getattr(mmap, "MADV_HUGEPAGE", None)
    if advice is not None:
        try:
            buf.madvise(advice)
        except OSError:  # THP disabled: plain pages, same numbers
            pass
    return torch.frombuffer(buf, dtype=torch.uint8)  # the tensor keeps ``buf`` alive


def _exact_half(t: torch.Tensor) -> bool:
    return bool(torch.equal(t.to(torch.float16).to(torch.float32), t))


def _check_tables(n: int, k: int, **tables: torch.Tensor) -> None:
    if k % GROUP or n < 1:
        raise ValueError(f"codes: need K a multiple of {GROUP} and N >= 1, got {(n, k)}")
    for name, t in tables.items():
        check_tensor(name, t, ndim=2, dtypes=(torch.float32,))
        if tuple(t.shape) != (n, k // GROUP):
            raise ValueError(f"{name}: expected shape {(n, k // GROUP)}, got {tuple(t.shape)}")


class PackedGemvWeight:
    """What the packed weights share: ``packed`` uint8, the kernel's layout of an ``[n, k]``
    weight (the subclasses are frozen dataclasses with those fields)."""

    packed: torch.Tensor
    n: int
    k: int

    @property
    def shape(self) -> tuple[int, int]:
        return self.n, self.k

    @property
    def nbytes(self) -> int:
        return int(self.packed.numel())


def packed_buffer(nbytes: int, arena: PackArena | None) -> torch.Tensor:
    """A uint8 ``[nbytes]`` buffer for a packed weight: from ``arena`` if given."""
    return torch.empty(nbytes, dtype=torch.uint8) if arena is None else arena.take(nbytes)


@dataclass(frozen=True)
class GroupedGemvWeight(PackedGemvWeight):
    """``packed`` uint8: the kernel's tiles for a ``[n, k]`` weight of ``bits`` 4 or 8 (module
    docstring); ``half``: its scales (and mins) stored as float16, exactly."""

    packed: torch.Tensor
    n: int
    k: int
    bits: int
    half: bool

    @classmethod
    def pack_int4(cls, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor,
                  arena: PackArena | None = None) -> GroupedGemvWeight:
        """Lay out codes uint8 ``[N, K]`` in [0, 15] and float32 ``scales``/``mins``
        ``[N, K / 32]`` (``w = scale * q + min``) for the kernel (in ``arena`` if given)."""
        _require()
        check_tensor("codes", codes, ndim=2, dtypes=(torch.uint8,))
        _check_tables(*codes.shape, scales=scales, mins=mins)
        if int(codes.max()) > 15:
            raise ValueError("codes: int4 codes must lie in [0, 15]")
        return cls._pack(codes, scales.contiguous(), mins.contiguous(), 4, arena)

    @classmethod
    def from_int4(cls, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor,
                  group_size: int, arena: PackArena | None = None) -> GroupedGemvWeight:
        """From torch's int4 convention ``w = (q - 8) * scale + zero`` (group 32 only)."""
        if group_size != GROUP:
            raise ValueError(f"q4_gemv supports groups of {GROUP} only, got {group_size}")
        return cls.pack_int4(codes, scales, zeros - 8.0 * scales, arena)

    @classmethod
    def pack_int8(cls, codes: torch.Tensor, scales: torch.Tensor,
                  arena: PackArena | None = None) -> GroupedGemvWeight:
        """Lay out codes int8 ``[N, K]`` and float32 ``scales`` ``[N, K / 32]`` (``w = scale *
        code``, GGUF's Q8_0) for the kernel (in ``arena`` if given)."""
        _require()
        check_tensor("codes", codes, ndim=2, dtypes=(torch.int8,))
        _check_tables(*codes.shape, scales=scales)
        return cls._pack(codes, scales.contiguous(), scales, 8, arena)

    @classmethod
    def _pack(cls, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor, bits: int,
              arena: PackArena | None) -> GroupedGemvWeight:
        n, k = codes.shape
        codes = codes.contiguous()
        half = _exact_half(scales) and _exact_half(mins)
        nbytes = _lib.packed_bytes(n, k, bits, half)
        packed = packed_buffer(nbytes, arena)
        _lib.pack(packed.data_ptr(), codes.data_ptr(), scales.data_ptr(), mins.data_ptr(), n, k,
                  bits, half)
        return cls(packed, int(n), int(k), bits, half)


def grouped_gemv_linear(x: torch.Tensor, weight: GroupedGemvWeight) -> torch.Tensor:
    """``x @ W.T`` for x ``[M, K]`` -> ``[M, N]`` in x's dtype (computed in float32)."""
    # kept lean: a decode step calls this ~120 times (tensor views and dtype no-ops cost
    # ~1-2 us each, a tenth of a small GEMV); pointers are offset by hand instead
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    check_dim("x", x, 1, weight.k)
    xf = x if x.dtype == torch.float32 else x.to(torch.float32)
    if not xf.is_contiguous():
        xf = xf.contiguous()
    m, n, k = xf.shape[0], weight.n, weight.k
    y = torch.empty(m, n, dtype=torch.float32)
    x_ptr, y_ptr, w_ptr = xf.data_ptr(), y.data_ptr(), weight.packed.data_ptr()
    for start in range(0, m, MAX_ROWS):  # rows 8 at a time: one pass over W each
        _lib.gemv(w_ptr, n, k, weight.bits, weight.half, x_ptr + 4 * start * k,
                  min(MAX_ROWS, m - start), y_ptr + 4 * start * n)
    return y if x.dtype == torch.float32 else y.to(x.dtype)


def grouped_weight_float64(codes: torch.Tensor, scales: torch.Tensor,
                           mins: torch.Tensor | None = None) -> torch.Tensor:
    """``scale * code (+ min)`` per group of 32, in float64 ``[N, K]`` (the torch reference)."""
    n, k = codes.shape
    w = codes.to(torch.float64).view(n, k // GROUP, GROUP) * scales.double()[..., None]
    if mins is not None:
        w = w + mins.double()[..., None]
    return w.view(n, k)


def grouped_gemv_reference(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor,
                           mins: torch.Tensor | None = None) -> torch.Tensor:
    """The float64 product ``x @ W.T`` the kernel approximates, as float32 (``mins`` None:
    int8 codes)."""
    return (x.double() @ grouped_weight_float64(codes, scales, mins).T).to(torch.float32)
