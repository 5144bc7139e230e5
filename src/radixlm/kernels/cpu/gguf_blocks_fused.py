"""Several GGUF block matrices sharing their input in one native call (``gemm_fused`` of
``native/gguf_blocks.c``).

A fused projection (q|k|v, gate|up) is several :class:`~.gguf_blocks.GGUFBlockLinear`
pieces over the file's own matrices. Called one by one, each piece quantizes the same
activation again and returns its own tensor, which then needs a concatenation (and for
llama's q/k rows, a gather into Hugging Face order): per decode step ~200 small calls whose
Python and torch overhead measured about as long as a sixth of their kernels' time on
SmolLM2. :class:`GGUFFusedBlocks` makes it one call: the activation is quantized once per
block size, every piece's rows land at their (optionally permuted) columns of one output,
and the values are bit-equal to the pieces' own results (the same integer sums and float
operations). Arguments are checked once at construction; ``forward`` only checks ``x``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import torch

from .gguf_blocks import _TYPE_IDS, GGUFBlockLinear, _lib


class GGUFFusedBlocks:
    """``y [T, sum(rows)] = cat(piece(x) for piece)[:, row_order]`` in one native call.

    ``pieces`` share ``cols``; ``row_order`` (int64 ``[sum(rows)]``, a permutation, or None)
    picks output column ``i`` from concatenated row ``row_order[i]``. Only for pieces that
    run natively (VNNI or portable, all the same path): :meth:`supports` says so.
    """

    def __init__(self, pieces: list[GGUFBlockLinear], row_order: torch.Tensor | None) -> None:
        if not self.supports(pieces):
            raise ValueError("GGUFFusedBlocks: pieces must share cols and one native path")
        self.pieces = tuple(pieces)  # keeps the raw bytes alive: the table holds pointers
        self.cols = pieces[0].cols
        self.width = sum(p.rows for p in pieces)
        # int64 [count, 4]: raw pointer, row stride, rows, type id (gemm_fused's table)
        self._table = torch.tensor([list(p._native[:3]) + [_TYPE_IDS[p.type_name]]
                                    for p in pieces], dtype=torch.int64)
        self._vnni = bool(pieces[0]._native[5])
        self.tiles = bool(pieces[0].tiles)  # more than 8 rows in the tiled kernel (VNNI)
        self._dest = None
        if row_order is not None:  # column i takes row row_order[i]: row j goes to dest[j]
            order = row_order.to(torch.int64)
            if (order.shape != (self.width,)
                    or not torch.equal(order.sort().values, torch.arange(self.width))):
                raise ValueError(f"row_order must be a permutation of range({self.width})")
            self._dest = torch.empty(self.width, dtype=torch.int32)
            self._dest[order] = torch.arange(self.width, dtype=torch.int32)
        self._args = (self._table.data_ptr(), len(pieces), self.cols)
        self._dest_ptr = 0 if self._dest is None else self._dest.data_ptr()

    @staticmethod
    def supports(pieces: list[GGUFBlockLinear]) -> bool:
        """True if ``pieces`` can run as one call: native, one path, one input width, one
        ``tiles`` choice."""
        return (_lib is not None and 0 < len(pieces) <= 8
                and all(p._native is not None for p in pieces)
                and len({(p.cols, p._native[5], p.tiles) for p in pieces}) == 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x float32 contiguous ``[T, cols]`` (T >= 1) -> float32 ``[T, width]``."""
        if (x.dtype != torch.float32 or x.ndim != 2 or x.shape[1] != self.cols
                or not x.is_contiguous() or x.shape[0] < 1):
            raise ValueError(f"x: expected float32 contiguous [T >= 1, {self.cols}], got "
                             f"{x.dtype} {tuple(x.shape)}")
        table, count, cols = self._args
        y = torch.empty(x.shape[0], self.width, dtype=torch.float32)
        _lib.gemm_fused(table, count, cols, x.data_ptr(), x.shape[0], y.data_ptr(), self.width,
                        self._dest_ptr, self._vnni, self.tiles)
        return y

    __call__ = forward

    def bound(self, x: torch.Tensor, y: torch.Tensor) -> Callable[[], None]:
        """:meth:`forward` of ``x`` written into ``y`` (float32 contiguous ``[T, width]``) as
        one bound native call: the same kernel on the same arguments, checked here once, for a
        caller that reuses both buffers every step (they must outlive the call)."""
        if (x.dtype != torch.float32 or x.ndim != 2 or x.shape[1] != self.cols
                or not x.is_contiguous() or x.shape[0] < 1 or y.dtype != torch.float32
                or y.shape != (x.shape[0], self.width) or not y.is_contiguous()):
            raise ValueError(f"bound: expected float32 contiguous x [T >= 1, {self.cols}] and "
                             f"y [T, {self.width}], got {tuple(x.shape)}, {tuple(y.shape)}")
        table, count, cols = self._args
        return partial(_lib.gemm_fused, table, count, cols, x.data_ptr(), x.shape[0],
                       y.data_ptr(), self.width, self._dest_ptr, self._vnni, self.tiles)
