"""A GGUF's token embedding read by rows from the file's map: no float copy of the table.

A quantized ``token_embd.weight`` ``[vocab, row_bytes]`` (a view of the map) stays as it is;
each forward copies the looked-up rows' bytes (``T x row_bytes``) and dequantizes only those
(:func:`~radixlm.kernels.cpu.gguf_blocks.gguf_block_dequantize`, bit-equal to the ``gguf``
package's) into the model's dtype. The table's float32 copy would be ``vocab x hidden x 4``
bytes (SmolLM2-135M: 113 MiB, Llama 3.1 8B: 2 GiB) for rows of which a step reads a handful.
The same bytes feed a tied LM head (``gguf_fused_linear.py``).
"""

from __future__ import annotations

import torch
from torch import nn

from ...kernels.cpu.gguf_blocks import gguf_block_dequantize


class GGUFEmbedding(nn.Module):
    """``ids [T] -> [T, dim]``: rows of a block-quantized table, dequantized per call."""

    def __init__(self, raw: torch.Tensor, type_name: str, dim: int,
                 dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        self.raw = raw  # uint8 [vocab, row_bytes], the file's bytes (not a buffer: to_empty)
        self.type_name = type_name
        self.dim = dim
        self.dtype = dtype

    @property
    def num_embeddings(self) -> int:
        return self.raw.shape[0]

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        rows = self.raw.index_select(0, ids.reshape(-1).long())  # [T, row_bytes], a copy
        if rows.shape[0] == 0:
            return torch.empty(*ids.shape, self.dim, dtype=self.dtype)
        w = gguf_block_dequantize(rows, self.type_name, self.dim)  # float32 [T, dim]
        return w.reshape(*ids.shape, self.dim).to(self.dtype)

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dim}, {self.type_name} rows mapped"
