"""Loads a checkpoint and runs batched forwards over the paged KV pool.

The runner owns the model weights, the KV pool and its page allocator. It knows nothing of
requests or caching policy: the scheduler (or a test) decides which slots each sequence uses
and hands over :class:`SeqSpec` lists.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from ...kernels import get_kernel_ops
from ...kernels.cpu.linear import onednn_linear_available
from ...kernels.cpu.quant_linear import INT4_GROUP_SIZES
from ..memory.kv_pool import KVPool
from ..memory.page_allocator import PageAllocator
from .forward_batch import ForwardBatch, SeqSpec
from .gemm_choice import GemmChooser
from .gguf_conversion import find_gguf, gguf_source, resolve_model_path
from .gguf_weights import MappedGGUF
from .model_config import ModelConfig
from .models import MODEL_CLASSES, DecoderForCausalLM
from .models.rope import RopeTables
from .quantized_linear import QUANTIZATIONS, CpuLinearBuilder
from .weight_loader import iter_weights

if TYPE_CHECKING:
    from .parallel.process_group import TPGroup

logger = logging.getLogger(__name__)

DTYPES = {
    "float32": torch.float32,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
}


@dataclass(frozen=True)
class RunnerConfig:
    """What the model runner needs; validated on construction."""

    dtype: str = "auto"  # auto = float32 on CPU, the checkpoint's dtype elsewhere
    device: str = "cpu"
    page_size: int = 1
    max_total_tokens: int = 8192  # KV pool capacity in tokens (rounded up to whole pages)
    kernel_backend: str = "auto"
    num_threads: int = 1
    max_context: int | None = None  # None = the model's max_position_embeddings
    # CPU matmuls: auto = fastest of F.linear / oneDNN-packed per shape and row count, measured
    # at load; onednn or torch fix one (float weights)
    cpu_gemm: str = "auto"
    # None, int8, int4 (grouped) or gguf (a GGUF's block weights on their own bits, read from
    # the file's memory map); None on a GGUF: its tensors dequantized to float32 at load
    quantization: str | None = None
    quantization_group_size: int = 32  # int4 group along the input dimension
    # the KV pool's element type: auto (the model's dtype), float32, bfloat16 / bf16 (half a
    # float32 pool; attention widens the rows a batch reads, memory/kv_pool.py)
    kv_cache_dtype: str = "auto"

    def __post_init__(self) -> None:
        if self.dtype not in ("auto", *DTYPES):
            raise ValueError(f"dtype must be auto or one of {sorted(DTYPES)}, got {self.dtype!r}")
        if self.page_size < 1:
            raise ValueError(f"page_size must be >= 1, got {self.page_size}")
        if self.max_total_tokens < self.page_size:
            raise ValueError(
                f"max_total_tokens ({self.max_total_tokens}) must hold at least one page "
                f"({self.page_size} tokens)"
            )
        if self.num_threads < 1:
            raise ValueError(f"num_threads must be >= 1, got {self.num_threads}")
        if self.cpu_gemm not in ("auto", "onednn", "torch", "quantized"):
            raise ValueError(f"cpu_gemm must be auto, onednn, torch or quantized, got "
                             f"{self.cpu_gemm!r}")
        if self.cpu_gemm == "quantized" and self.quantization is None:
            raise ValueError("cpu_gemm=quantized needs a quantization (int8, int4 or gguf)")
        if self.quantization not in (None, *QUANTIZATIONS):
            raise ValueError(f"quantization must be one of {list(QUANTIZATIONS)} or None, "
                             f"got {self.quantization!r}")
        if self.quantization_group_size not in INT4_GROUP_SIZES:
            raise ValueError(f"quantization_group_size must be one of {INT4_GROUP_SIZES}, "
                             f"got {self.quantization_group_size}")
        if self.quantization is not None and self.device != "cpu":
            raise ValueError(f"quantization={self.quantization!r} runs on CPU only (torch's "
                             f"weight-only CPU kernels); drop it for device {self.device!r}")
        if self.kv_cache_dtype not in ("auto", "bf16", *DTYPES):
            raise ValueError(f"kv_cache_dtype must be auto, bf16 or one of {sorted(DTYPES)}, "
                             f"got {self.kv_cache_dtype!r}")
        if self.max_context is not None and self.max_context < 1:
            raise ValueError(f"max_context must be >= 1, got {self.max_context}")

    def torch_dtype(self, model_cfg: ModelConfig) -> torch.dtype:
        if self.dtype != "auto":
            return DTYPES[self.dtype]
        if self.device == "cpu":
            return torch.float32
        return DTYPES.get(model_cfg.torch_dtype, torch.bfloat16)

    def kv_torch_dtype(self, model_cfg: ModelConfig) -> torch.dtype:
        """The KV pool's element type (``auto``: the model's)."""
        if self.kv_cache_dtype == "auto":
            return self.torch_dtype(model_cfg)
        return DTYPES["bfloat16" if self.kv_cache_dtype == "bf16" else self.kv_cache_dtype]


class ModelRunner:
    """A loaded model plus its KV pool; :meth:`forward` runs one mixed batch.

    With ``tp_group`` this process holds one tensor-parallel shard (its heads, MLP rows and
    vocabulary slice, and a KV pool of its KV heads); rank 0's :meth:`forward` first
    broadcasts the batch to the other ranks (``parallel/tp_worker.py`` runs theirs).
    """

    def __init__(self, model_path: str | Path, config: RunnerConfig | None = None,
                 tp_group: TPGroup | None = None, gguf: MappedGGUF | None = None) -> None:
        """``gguf``: the model's GGUF already opened (the caller sized the pool from it);
        otherwise a GGUF ``model_path`` (or its cached folder) is opened here."""
        self.config = config or RunnerConfig()
        self.tp_group = tp_group
        if tp_group is not None and self.config.quantization is not None:
            raise ValueError("quantization with tensor parallelism is not supported yet: the "
                             "quantized linears are built from whole weights; use tp_size=1")
        torch.set_num_threads(self.config.num_threads)
        self.gguf_path = find_gguf(model_path)
        # a .gguf: its config and tokenizer folder (made once); the weights stay in the file
        self.model_path = str(resolve_model_path(model_path))
        self.gguf_path = self.gguf_path or gguf_source(self.model_path)
        if gguf is None and self.gguf_path is not None:
            gguf = MappedGGUF(self.gguf_path)
        self.gguf = gguf
        self.model_config = ModelConfig.from_folder(self.model_path)
        self.device = torch.device(self.config.device)
        self.dtype = self.config.torch_dtype(self.model_config)
        if (self.device.type != "cpu"
                and self.config.kv_torch_dtype(self.model_config) != self.dtype):
            raise ValueError(f"kv_cache_dtype={self.config.kv_cache_dtype!r} beside dtype "
                             f"{self.dtype} runs on CPU only (CUDA graphs capture fixed "
                             f"reads); set --dtype to the same type on {self.device}")
        self.max_context = min(
            self.config.max_context or self.model_config.max_position_embeddings,
            self.model_config.max_position_embeddings,
            self.model_config.rope.max_positions or self.model_config.max_position_embeddings,
        )
        if self.model_config.rope.max_positions is not None:
            logger.warning("longrope: contexts up to original_max_position_embeddings (%d) only "
                           "(the short factors); the long_factor range is not implemented",
                           self.model_config.rope.max_positions)
        self.ops = get_kernel_ops(self.config.kernel_backend, self.device)
        self.sharding = None
        cfg = self.model_config  # this rank's shapes below (the whole model without TP)
        if tp_group is not None:
            from .parallel.sharding import TPSharding

            self.sharding = TPSharding.create(self.model_config, tp_group.size, tp_group.rank)
            cfg = self.sharding.local_config(self.model_config)
        page_size = self.config.page_size
        num_pages = -(-self.config.max_total_tokens // page_size)
        # RoPE rows for the positions a sequence can reach: every token of a sequence holds
        # a KV slot, so none passes the pool (SmolLM2 at 2,048 tokens: 0.5 MiB, not 2 for
        # its 8,192 positions; issue 40)
        self.rope_positions = min(self.max_context, num_pages * page_size)
        self.model = self._load_model(cfg)
        self.kv_pool = KVPool(
            cfg.num_layers, num_pages, page_size, cfg.num_kv_heads, cfg.head_dim,
            self.config.kv_torch_dtype(self.model_config), self.device,
        )
        self.allocator = PageAllocator(num_pages, page_size)
        self.workspace: dict[str, torch.Tensor] = {}  # attention gather buffers, reused

    def _load_model(self, cfg: ModelConfig) -> DecoderForCausalLM:
        # float32 tables on the device, built before the meta-device construction below
        rope = RopeTables.for_model(cfg, self.rope_positions, self.device)
        with torch.device("meta"):
            model = MODEL_CLASSES[cfg.model_type](cfg, self.ops, rope)
        skip: frozenset[str] = frozenset()
        if self.config.quantization == "gguf":  # the block linears never get float weights
            skip = self._attach_gguf_blocks(model)
        # Module.to_empty's empty_like on meta tensors runs torch's Python refs, which import
        # torch.fx's symbolic shapes and sympy (~34 MiB of RSS, never used): the same
        # uninitialized tensors from torch.empty
        device = self.device
        model = model._apply(lambda t: torch.empty(t.shape, dtype=t.dtype, device=device))
        model = model.to(self.dtype)
        # a GGUF's tensors come from its map (dequantized), a folder's from its safetensors
        weights = None if self.gguf is None else self.gguf.float_weights(skip)
        if self.sharding is None:
            model.load_weights(weights or iter_weights(self.model_path))
        else:
            from .parallel.sharded_weights import iter_sharded_weights

            model.load_weights(iter_sharded_weights(self.model_path, self.sharding, weights))
        if self.device.type == "cpu":
            self._build_cpu_linears(model)
        if self.tp_group is not None:
            from .parallel.layers import apply_tensor_parallel

            apply_tensor_parallel(model, self.sharding, self.tp_group)
        return model.eval()

    def _attach_gguf_blocks(self, model: DecoderForCausalLM) -> frozenset[str]:
        """Put the GGUF's block linears (views of the file's map) into the meta ``model``;
        the Hugging Face tensors they consume (not to load as float)."""
        if self.gguf is None:
            raise ValueError("quantization='gguf' runs a GGUF file's block weights on their own "
                             f"bits; {self.model_path!r} is not a GGUF (or its folder): pass "
                             "the .gguf as --model-path, or use int8 / int4")
        blocks = self.gguf.block_linears()
        mapped: dict[str, torch.nn.Module] = dict(blocks.modules)
        if blocks.embedding is not None:
            blocks.embedding.dtype = self.dtype
            mapped["embed_tokens"] = blocks.embedding
        model.attach_modules(mapped)
        self.gguf_blocks = blocks
        if blocks.dequantized:
            logger.info("GGUF tensors of types without a block kernel, dequantized to float32: "
                        "%s", blocks.dequantized)
        return blocks.consumed

    def _build_cpu_linears(self, model: DecoderForCausalLM) -> None:
        cfg = self.config
        if cfg.cpu_gemm == "onednn" and not onednn_linear_available(self.dtype):
            raise ValueError(f"cpu_gemm=onednn: this torch build cannot run oneDNN linears "
                             f"for {self.dtype}")
        fixed = None if cfg.cpu_gemm == "auto" else cfg.cpu_gemm
        self.gemm_chooser = GemmChooser(fixed=fixed, dtype=self.dtype)
        builder = CpuLinearBuilder(self.gemm_chooser, cfg.quantization,
                                   cfg.quantization_group_size, cfg.cpu_gemm)
        with torch.inference_mode():
            model.replace_linears(builder)  # the linears still float (all but GGUF blocks)
            self.gemm_chooser.finish()  # streamed buckets re-timed over all layers' weights
        blocks = getattr(self, "gguf_blocks", None)
        self.linear_kinds = {**(blocks.kinds() if blocks else {}), **builder.kinds}

    @property
    def vocab_size(self) -> int:
        return self.model_config.vocab_size

    def build_batch(self, seqs: Sequence[SeqSpec]) -> ForwardBatch:
        return ForwardBatch.build(
            seqs, device=self.device, max_context=self.max_context,
            page_size=self.config.page_size, workspace=self.workspace,
        )

    def forward(self, seqs: Sequence[SeqSpec] | ForwardBatch) -> torch.Tensor:
        """Run one step; returns float32 logits for each request's requested rows, in order."""
        batch = seqs if isinstance(seqs, ForwardBatch) else self.build_batch(seqs)
        if self.tp_group is not None and self.tp_group.is_leader:
            from .parallel.batch_broadcast import send_batch

            send_batch(self.tp_group, batch)
        return self.model(batch, self.kv_pool)
