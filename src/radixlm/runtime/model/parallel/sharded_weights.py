"""Each rank reads only its slice of every sharded tensor (safetensors slicing).

A GGUF checkpoint's tensors arrive dequantized from its memory map (``gguf_weights.py``)
and are sliced the same way, in memory. Phi-3's fused
``qkv_proj`` / ``gate_up_proj`` are split block by block. The tensors yielded keep their
Hugging Face names and have this rank's shapes, so the model's own ``load_weights`` (built
from :meth:`TPSharding.local_config`) places them unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open

from ..weight_loader import safetensors_files
from .sharding import TPSharding

# HF projection name -> (shard kind, dimension split): 0 = output rows (column-parallel),
# 1 = input columns (row-parallel).
_SPLITS = {
    "q_proj": ("q", 0), "k_proj": ("kv", 0), "v_proj": ("kv", 0), "o_proj": ("q", 1),
    "gate_proj": ("inter", 0), "up_proj": ("inter", 0), "down_proj": ("inter", 1),
    "embed_tokens": ("vocab", 0), "lm_head": ("vocab", 0),
}


def shard_rule(name: str) -> tuple[str, int] | None:
    """(kind, dim) for a Hugging Face tensor name, or None when every rank reads it whole.
    ``fused``: Phi-3's stored ``qkv_proj`` / ``gate_up_proj``, whose row blocks each split."""
    if ".qkv_proj." in name or ".gate_up_proj." in name:  # before v_proj / up_proj match it
        return "fused", 0
    for proj, rule in _SPLITS.items():
        if f"{proj}." in name:
            return rule
    return None


def iter_sharded_weights(
    folder: str | Path, sharding: TPSharding,
    weights: Iterable[tuple[str, torch.Tensor]] | None = None,
) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, this rank's slice)`` for every tensor of the checkpoint, on CPU: of
    ``weights`` when given (a GGUF's, in memory), else of the folder's safetensors."""
    if weights is not None:
        for name, tensor in weights:
            yield name, _read(_InMemory(tensor), name, sharding)
        return
    for path in safetensors_files(folder):
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for name in f.keys():
                yield name, _read(f, name, sharding)


def _read(f: Any, name: str, sharding: TPSharding) -> torch.Tensor:
    rule = shard_rule(name)
    if rule is None or sharding.tp_size == 1:
        return f.get_tensor(name)
    kind, dim = rule
    sl = f.get_slice(name)
    if kind == "fused":
        return _read_fused(sl, name, sharding)
    ndim = len(sl.get_shape())
    if dim == 1 and ndim == 1:
        # A row-parallel bias is added once after the all-reduce: rank 0 holds it, the
        # others hold zeros, so the sum over ranks is x @ W.T + b exactly once.
        full = f.get_tensor(name)
        return full if sharding.rank == 0 else torch.zeros_like(full)
    start, end = sharding.row_range(kind)
    part = sl[start:end] if dim == 0 else sl[:, start:end]
    if kind == "vocab" and part.shape[0] < sharding.vocab_per_rank:
        # The last rank's short vocabulary slice is padded with zero rows: never looked up
        # (ids < vocab) and its logits are cut off after the gather.
        pad = sharding.vocab_per_rank - part.shape[0]
        part = torch.cat([part, part.new_zeros((pad, *part.shape[1:]))])
    return part


def _read_fused(sl: Any, name: str, sharding: TPSharding) -> torch.Tensor:
    """This rank's rows of each block of a fused column-parallel tensor, concatenated in the
    same order: q | k | v rows of ``qkv_proj``, gate | up rows of ``gate_up_proj``."""
    rows = sl.get_shape()[0]
    if ".qkv_proj." in name:
        q = sharding.num_q_heads * sharding.tp_size * sharding.head_dim
        kv = (rows - q) // 2
        blocks = [(0, "q"), (q, "kv"), (q + kv, "kv")]
    else:
        blocks = [(0, "inter"), (rows // 2, "inter")]
    parts = []
    for offset, kind in blocks:
        start, end = sharding.row_range(kind)
        parts.append(sl[offset + start:offset + end])
    return torch.cat(parts)


class _InMemory:
    """One in-memory tensor behind the calls :func:`_read` makes on a safetensors file."""

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor

    def get_tensor(self, name: str) -> torch.Tensor:
        return self.tensor

    def get_slice(self, name: str) -> _InMemory:
        return self

    def get_shape(self) -> list[int]:
        return list(self.tensor.shape)

    def __getitem__(self, index: Any) -> torch.Tensor:
        return self.tensor[index]
