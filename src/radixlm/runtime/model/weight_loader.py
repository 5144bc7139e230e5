"""Reading tensors straight from a checkpoint's safetensors files (single file or sharded)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import torch
from safetensors import safe_open

from .model_config import UnsupportedModelError


def safetensors_files(folder: str | Path) -> list[Path]:
    """The weight files of a folder: the shards named by the index, or every ``*.safetensors``."""
    folder = Path(folder)
    index = folder / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text()).get("weight_map", {})
        files = sorted({folder / name for name in weight_map.values()})
    else:
        files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise UnsupportedModelError(
            f"{str(folder)!r} has no *.safetensors weights (only safetensors checkpoints load)"
        )
    missing = [str(f) for f in files if not f.is_file()]
    if missing:
        raise UnsupportedModelError(f"weight files named by the index are missing: {missing}")
    return files


def iter_weights(folder: str | Path) -> Iterator[tuple[str, torch.Tensor]]:
    """Yield ``(name, tensor)`` for every tensor in the checkpoint, on CPU, in file order."""
    for path in safetensors_files(folder):
        with safe_open(str(path), framework="pt", device="cpu") as f:
            for name in f.keys():
                yield name, f.get_tensor(name)
