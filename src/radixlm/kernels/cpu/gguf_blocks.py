"""STAND-IN: a linear over a GGUF tensor's own block bytes, dequantized chunk by chunk.

This file is a placeholder written on branch ``house-mapped`` so the mapped-GGUF loader can be
built and tested; the native kernel of the same module, class name and signature (branch
``house-kquant``) replaces it when the branches merge. Keep nothing else in this file.

``raw`` is a uint8 tensor ``[rows, row_bytes]`` viewing the file's bytes (read-only, never
written). Each call dequantizes :data:`CHUNK_ROWS` rows at a time with the ``gguf`` package and
multiplies them in float32, so the float32 copy of the whole weight never exists: the result
equals ``F.linear`` on the package's dequantization of the tensor.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K")  # the native kernel's
CHUNK_ROWS = 256  # rows dequantized at once: [256, cols] float32 at most per call


class GGUFBlockLinear:
    """``y = x @ W.T (+ bias)`` with ``W`` ``[rows, cols]`` held as GGUF blocks in ``raw``."""

    def __init__(self, raw: torch.Tensor, type_name: str, cols: int,
                 bias: torch.Tensor | None = None) -> None:
        import gguf

        if type_name not in _TYPES:
            raise ValueError(f"GGUF type {type_name} is not one of {_TYPES}")
        if raw.dtype != torch.uint8 or raw.dim() != 2:
            raise ValueError(f"raw must be uint8 [rows, row_bytes], got {raw.dtype} "
                             f"{tuple(raw.shape)}")
        self.raw = raw
        self.type_name = type_name
        self.qtype = getattr(gguf.GGMLQuantizationType, type_name)
        self.rows, self.cols = raw.shape[0], cols
        self.bias = bias

    @property
    def nbytes(self) -> int:
        """Bytes of the block weights (the file's, not a copy)."""
        return self.raw.numel()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[T, cols]`` float32 -> ``[T, rows]`` float32."""
        from gguf.quants import dequantize

        out = torch.empty(x.shape[0], self.rows, dtype=torch.float32)
        data = self.raw.numpy()
        for start in range(0, self.rows, CHUNK_ROWS):
            end = min(start + CHUNK_ROWS, self.rows)
            w = np.asarray(dequantize(data[start:end], self.qtype), dtype=np.float32)
            out[:, start:end] = F.linear(x, torch.from_numpy(w.reshape(end - start, self.cols)))
        return out if self.bias is None else out + self.bias

    __call__ = forward
