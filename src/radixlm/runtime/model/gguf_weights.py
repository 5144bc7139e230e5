"""A GGUF's weights read in place: block-quantized projections as views of the file's map.

The header reader (:mod:`radixlm.fsm.tokens.gguf_header`) memory-maps the file (read-only);
every tensor's ``data`` is a numpy view of that map. :class:`MappedGGUF` hands the runner:

* :meth:`MappedGGUF.block_linears`: our fused projections (``layers.3.self_attn.qkv_proj``,
  ``layers.3.mlp.gate_up_proj``, ..., ``lm_head``) whose GGUF pieces are all of a type in
  :data:`BLOCK_TYPES`, as :class:`GGUFFusedLinear` modules over uint8 ``[rows, row_bytes]``
  tensors that *are* the file's bytes (``torch.from_numpy`` of the map: no copy, the page
  cache holds them once for every process mapping the file);
* a block-typed token embedding as a :class:`~.gguf_embedding.GGUFEmbedding` (rows
  dequantized as they are looked up);
* :meth:`MappedGGUF.float_weights`: every other tensor (norms, float embeddings, biases,
  float or other-typed projections) dequantized to float32 under its Hugging Face name, for
  the model's ``load_weights`` (which copies each into its parameter).

Fused projections are a concatenation of block linears, not of raw rows: the pieces of one
fusion often differ in type (Q4_K_M stores ``attn_v`` / some ``ffn_down`` as Q6_K beside Q4_K),
and rows concatenated would be a copy, not a view of the file. llama's q/k row permutation
(:func:`~.gguf_checkpoint.unpermute_qk`) is applied to the product's output columns (one
gather of ``[T, rows]`` floats per call) rather than to the weight rows, for the same reason.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...kernels.cpu.gguf_blocks import GGUFBlockLinear
from .gguf_checkpoint import GGUFCheckpoint, hf_tensor_name, unpermute_qk
from .gguf_dequantize import dequantize_tensor, file_view
from .gguf_embedding import GGUFEmbedding
from .gguf_fused_linear import GGUFFusedLinear

# GGUF types that run on their own bits (GGMLQuantizationType names); other quantized types
# (Q2_K, Q3_K, Q5_1) are dequantized to float32 at load.
BLOCK_TYPES = ("Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K")
FLOAT_TYPES = ("F32", "F16", "BF16")
# our fused linear -> the Hugging Face projections concatenated into it, in row order
FUSED_PROJECTIONS = {
    "self_attn.qkv_proj": ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    "self_attn.o_proj": ("self_attn.o_proj",),
    "mlp.gate_up_proj": ("mlp.gate_proj", "mlp.up_proj"),
    "mlp.down_proj": ("mlp.down_proj",),
}
@dataclass(frozen=True)
class BlockLinears:
    """The mapped linears by our name, the Hugging Face tensors they consume (weights and
    biases: not to be loaded as float) and the quantized GGUF tensors that run dequantized
    instead, with their types (for the start-up log)."""

    modules: dict[str, GGUFFusedLinear]
    consumed: frozenset[str]
    dequantized: dict[str, str]
    embedding: GGUFEmbedding | None = None  # a block-typed table, read by rows

    @property
    def nbytes(self) -> int:
        """Bytes of the file the block linears and the embedding read (mapped; a tied table
        counted once)."""
        raws = [p.raw for m in self.modules.values() for p in m.pieces]
        raws += [] if self.embedding is None else [self.embedding.raw]
        return sum(r.numel() for r in {r.data_ptr(): r for r in raws}.values())

    def kinds(self) -> dict[str, int]:
        """``{"gguf-Q4_1": 120, ...}``: linears per block type (``+``-joined when mixed)."""
        out: dict[str, int] = {}
        for m in self.modules.values():
            out[m.kind] = out.get(m.kind, 0) + 1
        return out


class MappedGGUF:
    """A validated GGUF file whose tensors are read from its memory map."""

    def __init__(self, path: str | Path) -> None:
        # the checkpoint (its parsed header) is dropped after this; the tensors keep only
        # the map alive
        checkpoint = GGUFCheckpoint(path)
        self.path = checkpoint.path
        self.config = checkpoint.hf_config()
        arch = checkpoint.architecture  # names differ per family (Gemma's sandwich norms)
        self._tensors = {hf_tensor_name(t.name, arch): t for t in checkpoint.raw_tensors}
        self._norms_plus_one = checkpoint.family.norms_plus_one
        self._tensors.pop(None, None)
        self._heads = checkpoint.permuted_heads(self.config)

    def block_linears(self) -> BlockLinears:
        """Every fused projection (and the LM head) whose pieces are all :data:`BLOCK_TYPES`."""
        modules: dict[str, GGUFFusedLinear] = {}
        consumed: set[str] = set()
        for i in range(self.config["num_hidden_layers"]):
            for fused, parts in FUSED_PROJECTIONS.items():
                names = [f"model.layers.{i}.{p}" for p in parts]
                module = self._fused(names)
                if module is not None:
                    modules[f"layers.{i}.{fused}"] = module
                    consumed.update(f"{n}.{kind}" for n in names for kind in ("weight", "bias"))
        head = "model.embed_tokens" if self.config["tie_word_embeddings"] else "lm_head"
        module = self._fused([head])
        if module is not None:
            modules["lm_head"] = module
            if head == "lm_head":  # a tied head's table also feeds the embedding: load it
                consumed.add("lm_head.weight")
        embedding = self._embedding()
        if embedding is not None:
            consumed.add("model.embed_tokens.weight")
        dequantized = {t.name: t.type_name for n, t in self._tensors.items()
                       if n not in consumed and t.type_name not in FLOAT_TYPES}
        return BlockLinears(modules, frozenset(consumed), dequantized, embedding)

    def _embedding(self) -> GGUFEmbedding | None:
        t = self._tensors.get("model.embed_tokens.weight")
        if t is None or t.type_name not in BLOCK_TYPES:
            return None  # a float table loads as the embedding's parameter
        return GGUFEmbedding(file_view(t.data), t.type_name, self.config["hidden_size"])

    def _fused(self, names: list[str]) -> GGUFFusedLinear | None:
        tensors = [self._tensors.get(f"{n}.weight") for n in names]
        if any(t is None or t.type_name not in BLOCK_TYPES for t in tensors):
            return None
        pieces = []
        for t in tensors:
            rows, cols = (int(d) for d in reversed(t.shape))
            pieces.append(GGUFBlockLinear(file_view(t.data), t.type_name, cols))
        return GGUFFusedLinear(pieces, self._row_order(names, pieces), self._bias(names))

    def _row_order(self, names: list[str], pieces: list[GGUFBlockLinear]) -> torch.Tensor | None:
        """The fused output's Hugging Face row order as indices into the file's rows (None
        when they agree): llama's q and k rows are stored permuted."""
        order, offset, permuted = [], 0, False
        for name, piece in zip(names, pieces):
            rows = torch.arange(offset, offset + piece.rows)
            heads = next((h for proj, h in self._heads.items() if name.endswith(proj)), None)
            if heads is not None:
                rows, permuted = unpermute_qk(rows, heads), True
            order.append(rows)
            offset += piece.rows
        return torch.cat(order) if permuted else None

    def _bias(self, names: list[str]) -> torch.Tensor | None:
        """The fused float32 bias in Hugging Face row order (Qwen2's q/k/v), or None."""
        biases = [self._tensors.get(f"{n}.bias") for n in names]
        if all(b is None for b in biases):
            return None
        if any(b is None for b in biases):
            raise ValueError(f"{self.path}: only some of {names} have a bias")
        return torch.cat([self._float(f"{n}.bias", b) for n, b in zip(names, biases)])

    def float_weights(self, skip: frozenset[str] = frozenset()
                      ) -> Iterator[tuple[str, torch.Tensor]]:
        """``(hf_name, float32 tensor)`` for every tensor not in ``skip``, in file order, q/k
        rows un-permuted (llama). F32 tensors are views of the map (the loader copies them)."""
        for name, t in self._tensors.items():
            if name not in skip:
                yield name, self._float(name, t)

    def _float(self, name: str, t: Any) -> torch.Tensor:
        w = file_view(dequantize_tensor(t))  # numpy order: [out, in]
        for proj, heads in self._heads.items():
            if f".{proj}." in name:
                w = unpermute_qk(w, heads)
        if self._norms_plus_one and name.endswith("norm.weight"):
            w = w - 1.0  # the file holds 1 + w (Gemma), as iter_weights undoes it too
        return w

    def resident_bytes(self, quantized: bool) -> int:
        """The weights' memory in this process: float32 for every tensor, or with
        ``quantized`` the mapped blocks' bytes for the block linears (file pages)."""
        blocks = self.block_linears() if quantized else BlockLinears({}, frozenset(), {}, None)
        floats = sum(int(np.prod([int(d) for d in t.shape])) * 4
                     for n, t in self._tensors.items() if n not in blocks.consumed)
        return floats + blocks.nbytes
