"""A GGUF tensor's values as float32, from the file's map, without the ``gguf`` package.

:func:`dequantize_tensor` takes a :class:`~radixlm.fsm.tokens.gguf_header.GGUFTensorInfo`
(its ``data`` a read-only view of the map): F32 comes back as that view (no copy), F16 and
BF16 are widened by numpy, the block types our kernels know (Q4_0 ... Q6_K) are decoded by
:func:`~radixlm.kernels.cpu.gguf_blocks.gguf_block_dequantize` (bit-equal to the ``gguf``
package's), and only the rare others (Q2_K, Q3_K, Q5_1, ...) fall back to ``gguf.quants``,
whose import (it pulls in ``mistral_common``, 5-18 s) the common files never pay.
"""

from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from ...kernels.cpu.gguf_blocks import gguf_block_dequantize, gguf_block_types

_READ_ONLY = "The given NumPy array is not writable"  # torch's warning for a read-only map


def file_view(data: np.ndarray) -> torch.Tensor:
    """``data`` (a view of the read-only map) as a tensor sharing its memory. torch warns that
    writing through it would be undefined; nothing here writes, and a write would fault."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_READ_ONLY, category=UserWarning)
        return torch.from_numpy(data)


def dequantize_tensor(t: Any) -> np.ndarray:
    """Tensor ``t``'s values, float32 in numpy order (``[out, in]`` for a matrix); a view of
    the map for F32 (read-only), else a new array."""
    shape = tuple(reversed(t.shape))
    if t.type_name == "F32":
        return t.data.reshape(shape)
    if t.type_name == "F16":
        return t.data.astype(np.float32).reshape(shape)
    if t.type_name == "BF16":  # raw bytes: the top half of each float32
        return (t.data.view(np.uint16).astype(np.uint32) << 16).view(np.float32).reshape(shape)
    if t.type_name in gguf_block_types():
        cols = shape[-1]
        raw = file_view(t.data.reshape(-1, t.data.shape[-1]))  # [rows, row_bytes]
        return gguf_block_dequantize(raw, t.type_name, cols).numpy().reshape(shape)
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize

    values = dequantize(t.data, GGMLQuantizationType(t.type_id))
    return np.asarray(values, dtype=np.float32).reshape(shape)
