"""One of our fused projections (q|k|v, gate|up, or a single one) over GGUF block weights.

Each piece is a :class:`~radixlm.kernels.cpu.gguf_blocks.GGUFBlockLinear` over the file's own
bytes; the pieces' outputs are concatenated in our row order (several GEMVs, then one copy of
the ``[T, rows]`` result), optionally gathered into Hugging Face row order (llama's permuted
q/k rows) and given a float32 bias (Qwen2's q/k/v). Nothing here is a parameter or buffer:
``Module.to_empty`` / ``.to`` leave the mapped bytes alone.
"""

from __future__ import annotations

import torch
from torch import nn

from ...kernels.cpu.gguf_blocks import GGUFBlockLinear


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

    @property
    def nbytes(self) -> int:
        """Bytes of the file's blocks this linear reads."""
        return sum(p.nbytes for p in self.pieces)

    @property
    def kind(self) -> str:
        """``gguf-Q4_K`` or, for pieces of several types, ``gguf-Q4_K+Q6_K``."""
        return "gguf-" + "+".join(sorted({p.type_name for p in self.pieces}))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
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
