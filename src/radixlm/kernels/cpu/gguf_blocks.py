"""Linear layers computed on a GGUF matrix's own blocks (``native/gguf_blocks.c``).

``raw`` is the matrix as the file stores it, uint8 ``[rows, row_bytes]`` (rows = output
features, often a read-only view of the file's memory map; never copied or repacked), of one
type of :func:`gguf_block_types` (F16/BF16/F32 matrices stay on the float paths). ``y = x @
W.T`` is computed by the native module without decoding W to memory:

* **numerics**: each activation row is quantized per block to int8 as llama.cpp does (steps
  ``dx = max|x| / 127`` per 32 inputs for Q4_0/Q4_1/Q5_0/Q8_0, per 256 for the K-quants), then
  the products are exact integer dot products (VNNI) with one float multiply-add per block. So
  ``|y - x @ W.T| <= sum_k |W[n, k]| dx_k / 2`` plus float32 rounding (tested within ``2^-20``
  of ``sum_k |W[n, k] x_k|``), about ``2^-8`` of ``sum_k |W[n, k]| max|x|`` where float32
  keeps ``2^-24``. The float32-faithful 24-bit activations of :mod:`.q4_gemv` (three int8
  digit planes) would cost three times the integer work on this layout;
  ``benchmarks/gguf_block_kernels.py`` times that kernel on its repacked tiles beside these;
* **paths**: AVX-512 VNNI where the CPU has it, else the portable C loop (same integers; an
  AVX2 clone of it where the CPU has AVX2, bit-identical to the baseline x86-64 one),
  else (module not built) the torch reference :func:`~..reference.gguf_blocks.gguf_linear_ref`;
  ``path=`` forces one (tests); ``"tiled"`` is the alternative prefill below;
* **rows**: on VNNI with ``tiles=True`` (the default, :data:`TILES_DEFAULT`) more than one
  row runs the tiled kernel (``native/gguf_blocks_tiles.h``): passes of 128 rows, each block
  decoded once per pass, a lane per sub-block (block) so about half the work per row; one
  row (decode) runs ``native/gguf_blocks_lanes.h``, the same float32 operations in the same
  lanes and order (the lane sums by reducing the dot products instead of transposing the
  codes), and 2 to 9 rows (a speculative verify's; up to a limit per type, measured against
  the tiles) ``native/gguf_blocks_few.h``, each block decoded once for all of them and each
  row's operations the lanes kernel's. So a row's bits do not depend on how many rows share
  its call
  (``tests/kernels/cpu/test_gguf_blocks_row_invariance.py``). ``tiles=False``: the
  streaming kernel, W streamed once per pass of up to 8 rows (one row: 4 output rows a pass,
  ``native/gguf_blocks_decode.h``), also row-invariant, in its own order (another rounding
  of the same exact integers per sub-block, within the same bound). The portable loop runs
  passes of 32 rows, each row's float operations the same whatever the pass. Measured
  against the alternative, W dequantized tile by tile to float32 into torch's GEMM
  (``path="tiled"``): on Zen 4 (1 thread) at 128 rows the passes of 8 take 0.5-0.9x the
  time of the float32 GEMM alone, before any dequantizing
  (``benchmarks/gguf_block_kernels.py`` times all three).

Everything runs on the caller's thread with the GIL released.
"""

from __future__ import annotations

import torch

from ..reference.checks import FLOAT_DTYPES, check_dim, check_tensor
from ..reference.gguf_blocks import GGUF_BLOCKS, check_raw, gguf_linear_ref
from . import native

# the C module's type ids, in its enum's order
_TYPE_IDS = {name: i for i, name in enumerate(
    ("Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K"))}
assert set(_TYPE_IDS) == set(GGUF_BLOCKS)
PATHS = ("auto", "vnni", "portable", "reference", "tiled")
# whether the VNNI path runs the tiles' summation order (tiles for 2+ rows, the lanes kernel
# for 1) rather than the streaming kernel's: on. The tiles are 1.3-1.9x the passes of 8 in
# prefill; the two orders differ only in float32 rounding (perplexity on 1,876 tokens,
# test_quantized_real_model.py, bound 1% of float32's 25.69: passes of 8 +0.49%, tiles
# +0.79%, portable +0.88%). Each order is the same for every row count (a row's bits never
# depend on how many rows share its call), which the runtime's exactness needs with int8
# activations (the last bit moves greedy tokens at near ties): a cached prefix's
# continuation equals the cold run's (test_gguf_real_model.py::
# test_prefix_cache_hit_gives_the_cold_runs_tokens) and a speculative verify's rows equal
# the one-token steps.
TILES_DEFAULT = True
# float32 bytes of one dequantized tile of W (path="tiled"): torch's GEMM wants tall tiles
# (1 MiB ones, 18 rows at 14336 inputs, ran 2x slower than 8 MiB)
TILE_BYTES = 8 << 20

_lib = native.load("gguf_blocks")
_NEEDS = "AVX-512 VNNI (avx512f/bw/vl/vnni, f16c, fma)"


def gguf_block_types() -> tuple[str, ...]:
    """The GGUF block types :class:`GGUFBlockLinear` computes on."""
    return tuple(_TYPE_IDS)


def gguf_blocks_built() -> bool:
    """True if the native module was built (its portable path runs on any CPU)."""
    return _lib is not None


def gguf_blocks_vnni() -> bool:
    """True if the native module's AVX-512 VNNI path runs on this CPU."""
    return _lib is not None and bool(_lib.supported())


def _resolve(path: str) -> str:
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    if path in ("auto", "tiled") and _lib is None:
        return "reference"
    if path == "auto":
        return "vnni" if gguf_blocks_vnni() else "portable"
    if path == "vnni" or (path == "portable" and _lib is None):
        native.require(_lib, "gguf_blocks", _NEEDS)  # raises, naming why
    return path


def _check_layout(raw: torch.Tensor, type_name: str, cols: int) -> None:
    check_raw(raw, type_name, cols)
    if raw.stride(1) != 1 or raw.stride(0) < raw.shape[1]:
        raise ValueError("raw: rows must be contiguous byte runs (stride(1) == 1)")


def gguf_block_dequantize(raw: torch.Tensor, type_name: str, cols: int, first: int = 0,
                          count: int | None = None,
                          out: torch.Tensor | None = None) -> torch.Tensor:
    """Rows ``[first, first + count)`` of ``raw`` as float32 ``[count, cols]``, bit-equal to the
    reference (native: vectorized on AVX-512; the reference where the module is not built),
    into ``out`` (contiguous float32 ``[count, cols]``) if given."""
    _check_layout(raw, type_name, cols)
    count = raw.shape[0] - first if count is None else count
    if first < 0 or count < 1 or first + count > raw.shape[0]:
        raise ValueError(f"rows [{first}, {first + count}) outside raw's {raw.shape[0]}")
    if out is None:
        out = torch.empty(count, cols, dtype=torch.float32)
    check_tensor("out", out, ndim=2, dtypes=(torch.float32,), contiguous=True)
    if tuple(out.shape) != (count, cols):
        raise ValueError(f"out: expected shape {(count, cols)}, got {tuple(out.shape)}")
    if _lib is None:
        from ..reference.gguf_blocks import gguf_dequantize
        return out.copy_(gguf_dequantize(raw[first:first + count], type_name, cols))
    _lib.dequantize(raw.data_ptr(), raw.stride(0), first, count, cols, _TYPE_IDS[type_name],
                    out.data_ptr())
    return out


def _tiled(x: torch.Tensor, raw: torch.Tensor, type_name: str, cols: int) -> torch.Tensor:
    """Prefill alternative: W in tiles of rows dequantized to float32 (one reused buffer of
    about :data:`TILE_BYTES`), each through torch's GEMM."""
    rows = raw.shape[0]
    tile = max(16, TILE_BYTES // (4 * cols))
    buf = torch.empty(min(tile, rows) * cols, dtype=torch.float32)
    y = torch.empty(x.shape[0], rows, dtype=torch.float32)
    for r0 in range(0, rows, tile):
        count = min(tile, rows - r0)
        w = buf[:count * cols].view(count, cols)
        gguf_block_dequantize(raw, type_name, cols, r0, count, out=w)
        torch.mm(x, w.T, out=y[:, r0:r0 + count])
    return y


def gguf_block_linear(x: torch.Tensor, raw: torch.Tensor, type_name: str, cols: int,
                      path: str = "auto", tiles: bool = TILES_DEFAULT) -> torch.Tensor:
    """``x @ W.T``: x ``[T, cols]`` (float32/16, bfloat16) -> float32 ``[T, rows]``, W the GGUF
    blocks ``raw`` (module docstring; ``path`` one of :data:`PATHS`; ``tiles``: on VNNI the
    tiles' order (tiles above 1 row, the lanes kernel at 1), else the streaming kernel's)."""
    check_tensor("x", x, ndim=2, dtypes=FLOAT_DTYPES)
    check_dim("x", x, 1, cols)
    _check_layout(raw, type_name, cols)
    chosen = _resolve(path)
    if chosen == "reference":
        return gguf_linear_ref(x, raw, type_name, cols)
    xf = x.to(torch.float32).contiguous()
    if chosen == "tiled":
        return _tiled(xf, raw, type_name, cols)
    y = torch.empty(x.shape[0], raw.shape[0], dtype=torch.float32)
    if x.shape[0]:
        _lib.gemm(raw.data_ptr(), raw.stride(0), raw.shape[0], cols, _TYPE_IDS[type_name],
                  xf.data_ptr(), x.shape[0], y.data_ptr(), chosen == "vnni", tiles)
    return y


class GGUFBlockLinear:
    """A linear layer over a GGUF matrix's raw blocks: ``forward(x [T, cols]) -> [T, rows]``
    float32 (plus ``bias``). ``raw`` uint8 ``[rows, row_bytes]`` is kept as given (a read-only
    memory-map view stays one): no copy, no repacking, ``nbytes`` is its size."""

    def __init__(self, raw: torch.Tensor, type_name: str, cols: int,
                 bias: torch.Tensor | None = None, path: str = "auto",
                 tiles: bool = TILES_DEFAULT) -> None:
        _check_layout(raw, type_name, cols)
        if bias is not None:
            check_tensor("bias", bias, ndim=1, dtypes=(torch.float32,))
            check_dim("bias", bias, 0, raw.shape[0])
        self.raw, self.type_name, self.cols, self.bias, self.path = raw, type_name, cols, bias, path
        self.tiles = tiles
        # the native call's fixed arguments, resolved once (a decode step makes ~200 calls)
        chosen = _resolve(path)
        self._native = None if chosen not in ("vnni", "portable") else (
            raw.data_ptr(), raw.stride(0), raw.shape[0], cols, _TYPE_IDS[type_name],
            chosen == "vnni", tiles)

    @property
    def rows(self) -> int:
        """Output features."""
        return int(self.raw.shape[0])

    @property
    def nbytes(self) -> int:
        """Bytes the weight occupies: its raw blocks (plus a bias)."""
        extra = 0 if self.bias is None else self.bias.numel() * 4
        return int(self.raw.shape[0] * self.raw.shape[1]) + extra

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x @ W.T (+ bias)``: x ``[T, cols]`` -> float32 ``[T, rows]``."""
        if (self._native is None or x.dtype != torch.float32 or x.ndim != 2
                or x.shape[1] != self.cols or not x.is_contiguous() or x.shape[0] < 1):
            y = gguf_block_linear(x, self.raw, self.type_name, self.cols, self.path, self.tiles)
        else:  # the lean call: arguments checked once at construction
            raw, stride, rows, cols, type_id, vnni, tiles = self._native
            y = torch.empty(x.shape[0], rows, dtype=torch.float32)
            _lib.gemm(raw, stride, rows, cols, type_id, x.data_ptr(), x.shape[0], y.data_ptr(),
                      vnni, tiles)
        return y if self.bias is None else y.add_(self.bias)

    __call__ = forward

    def __repr__(self) -> str:
        return (f"GGUFBlockLinear({self.type_name}, rows={self.rows}, cols={self.cols}, "
                f"bias={self.bias is not None})")
