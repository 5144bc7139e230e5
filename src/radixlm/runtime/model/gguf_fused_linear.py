"""One of our fused projections (q|k|v, gate|up, or a single one) over GGUF block weights.

Each piece is a :class:`~radixlm.kernels.cpu.gguf_blocks.GGUFBlockLinear` over the file's own
bytes; the pieces' outputs are concatenated in our row order, optionally gathered into Hugging
Face row order (llama's permuted q/k rows) and given a float32 bias (Qwen2's q/k/v). On the
native paths all of that but the bias is one call
(:class:`~radixlm.kernels.cpu.gguf_blocks_fused.GGUFFusedBlocks`: the activation quantized
once, each row written to its final column) for float32 contiguous rows; otherwise (and as
the reference) the pieces run one by one, then ``torch.cat`` and ``index_select``. Nothing
here is a parameter or buffer: ``Module.to_empty`` / ``.to`` leave the mapped bytes alone.
"""

from __future__ import annotations

import torch
from torch import nn

from ...kernels.cpu.gguf_blocks import GGUFBlockLinear
from ...kernels.cpu.gguf_blocks_fused import GGUFFusedBlocks


class GGUFFusedLinear(nn.Module):
    """``y [T, sum(rows)] = cat(piece(x) for piece)[:, row_order] + bias`` (x ``[T, cols]``)."""

    def __init__(self, pieces: list[GGUFBlockLinear], row_order: torch.Tensor | None,
                 bias: torch.Tensor | None) -> None:
        super().__init__()
        if len({p.cols for p in pieces}) != 1:
            raise ValueError("fused pieces must share their input width")
        self.pieces = tuple(pieces)
        self.row_order = row_order  # [rows] int64 indices into the file's rows, or None
        self.bias = bias  # [rows] float32, in our (Hugging Face) row order, or None
        self.in_features = pieces[0].cols
        self.out_features = sum(p.rows for p in pieces)
        # the one-call path where every piece runs natively (None: pieces one by one)
        self._fused = (GGUFFusedBlocks(pieces, row_order) if GGUFFusedBlocks.supports(pieces)
                       else None)

    @property
    def nbytes(self) -> int:
        """Bytes of the file's blocks this linear reads."""
        return sum(p.nbytes for p in self.pieces)

    @property
    def kind(self) -> str:
        """``gguf-Q4_K`` or, for pieces of several types, ``gguf-Q4_K+Q6_K``."""
        return "gguf-" + "+".join(sorted({p.type_name for p in self.pieces}))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fused = self._fused
        if (fused is not None and x.dtype == torch.float32 and x.ndim == 2 and x.shape[0]
                and x.is_contiguous()):  # the runner's rows: one native call
            y = fused.forward(x)
            return y if self.bias is None else y.add_(self.bias)
        return self.forward_pieces(x)

    def forward_pieces(self, x: torch.Tensor) -> torch.Tensor:
        """The pieces one by one, concatenated and gathered (any float dtype and shape)."""
        dtype = x.dtype
        x = x.to(torch.float32).contiguous()  # no-op for the runner's float32 rows
        if len(self.pieces) == 1:
            y = self.pieces[0].forward(x)
        else:
            y = torch.cat([p.forward(x) for p in self.pieces], dim=1)
        if self.row_order is not None:
            y = y.index_select(1, self.row_order)
        if self.bias is not None:
            y = y + self.bias
        return y.to(dtype)

    def extra_repr(self) -> str:
        return (f"in={self.in_features}, out={self.out_features}, {self.kind}, "
                f"{self.nbytes / 2**20:.1f} MiB mapped")
