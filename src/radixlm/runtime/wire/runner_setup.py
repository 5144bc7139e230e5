"""Building a process's model runner from the server args: pool sizing and, with
``--tp-size``, joining the tensor-parallel group first. Shared by the scheduler process (rank 0)
and the TP worker processes, so every rank loads the same way and agrees on one pool size.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any

from ... import env
from ..server_args import ServerArgs

logger = logging.getLogger(__name__)


def tp_group_config(args: ServerArgs, rank: int) -> Any:  # TPGroupConfig
    """Rank ``rank``'s place in the group described by ``args`` (launcher-filled address)."""
    from ..model.parallel.process_group import TPGroupConfig

    if args.dist_init_addr is None:
        raise ValueError("tp_size > 1 needs dist_init_addr (the launcher picks one on a single "
                         "node)")
    return TPGroupConfig(tp_size=args.tp_size, rank=rank, dist_init_addr=args.dist_init_addr,
                         device=args.device, nnodes=args.nnodes)


def pool_size(args: ServerArgs, runner_cfg: Any, tp_size: int = 1,  # noqa: ANN201
              weights_bytes: int | None = None):
    """(KV pool, weights bytes) of one rank's shard on this device (memory/pool_sizing.py);
    ``weights_bytes``: the weights' memory when known (a mapped GGUF's), else estimated from
    the parameter count at ``dtype``."""
    from ..memory.pool_sizing import (
        DEFAULT_MEM_FRACTION,
        device_memory_bytes,
        kv_bytes_per_token,
        pool_sequences,
        size_kv_pool,
    )
    from ..model.model_config import ModelConfig
    from ..model.parallel.sharding import TPSharding
    from ..server_args import DEFAULT_MAX_RUNNING_REQUESTS

    cfg = ModelConfig.from_folder(args.model_path)
    dtype_bytes = runner_cfg.torch_dtype(cfg).itemsize
    kind = "cuda" if args.device.startswith("cuda") else "cpu"
    context = min(args.context_length or cfg.max_position_embeddings,
                  cfg.max_position_embeddings)
    kv_heads = TPSharding.create(cfg, tp_size, 0).num_kv_heads
    weights = weights_bytes  # else about: norms are replicated
    if weights is None:
        weights = -(-cfg.num_parameters * dtype_bytes // tp_size)
    fraction_given = args.mem_fraction_static is not None
    return size_kv_pool(
        available_bytes=device_memory_bytes(args.device),
        weights_bytes=weights,
        bytes_per_token=kv_bytes_per_token(cfg.num_layers, kv_heads, cfg.head_dim,
                                           runner_cfg.kv_torch_dtype(cfg).itemsize),
        mem_fraction=args.mem_fraction_static or DEFAULT_MEM_FRACTION[kind],
        mem_fraction_given=fraction_given, context_length=context,
        max_running_requests=pool_sequences(kind, args.max_running_requests, fraction_given,
                                            DEFAULT_MAX_RUNNING_REQUESTS),
        page_size=args.page_size, max_total_tokens=args.max_total_tokens), weights


def load_runner(args: ServerArgs, rank: int = 0):  # noqa: ANN201 - (ModelRunner, PoolSize, int)
    """This rank's runner, its pool and its weight bytes; joins the TP group when tp > 1."""
    import torch

    from ..model.model_runner import ModelRunner, RunnerConfig

    start = time.perf_counter()
    torch.set_num_threads(args.num_threads)
    group = None
    device = args.device
    if args.tp_size > 1:
        from ..model.parallel.process_group import init_tp_group, min_over_ranks

        group_cfg = tp_group_config(args, rank)
        group = init_tp_group(group_cfg)
        if device.startswith("cuda"):
            device = f"cuda:{group_cfg.local_rank}"
    quantization, why = args.resolved_quantization
    runner_cfg = RunnerConfig(
        dtype=args.dtype, device=device, page_size=args.page_size,
        kernel_backend=args.kernel_backend, num_threads=args.num_threads,
        max_context=args.context_length, cpu_gemm=args.cpu_gemm,
        quantization=quantization, quantization_group_size=args.quantization_group_size,
        kv_cache_dtype=args.kv_cache_dtype,
    )
    gguf = _mapped_gguf(args.model_path) if quantization == "gguf" else None
    pool, weights = pool_size(args, runner_cfg, args.tp_size,
                              None if gguf is None else gguf.resident_bytes(quantized=True))
    if group is not None:  # every rank's pool must hold rank 0's slot indices: take the min
        tokens = min_over_ranks(group, pool.tokens)
        if tokens != pool.tokens:
            pool = dataclasses.replace(pool, tokens=tokens, bytes=tokens * pool.bytes_per_token,
                                       limited_by="the smallest rank's pool",
                                       detail=f"this rank's: {pool.describe()}")
    runner = ModelRunner(args.model_path, dataclasses.replace(
        runner_cfg, max_total_tokens=pool.tokens), tp_group=group, gguf=gguf)
    dtype = str(runner.dtype).removeprefix("torch.")
    kv_dtype = str(runner.kv_pool.k_buffers[0].dtype).removeprefix("torch.")
    logger.info(
        "rank %d/%d loaded %s in %.1f s: weights %s MiB, KV pool %s, %d B/token in %s, "
        "weights %s (%s), dtype %s, page size %d, %d thread(s)", rank, args.tp_size,
        args.model_path, time.perf_counter() - start, f"{weights / 2**20:,.0f}",
        pool.describe(), pool.bytes_per_token, kv_dtype,
        _weights_format(quantization, gguf, dtype), why, dtype, args.page_size,
        args.num_threads)
    if args.num_threads > 1 and env.omp_spin_waits():
        logger.warning("%d threads with OpenMP spin-waiting: on shared cores this can be many "
                       "times slower than 1 thread; set OMP_WAIT_POLICY=PASSIVE before start",
                       args.num_threads)
    if getattr(runner, "linear_kinds", None):
        logger.info("CPU linears: %s (quantization %s); GEMM per shape measured in %.1f s",
                    runner.linear_kinds, quantization, runner.gemm_chooser.seconds)
    return runner, pool, weights


def _mapped_gguf(model_path: str) -> Any:  # MappedGGUF | None
    """The model's GGUF opened (memory-mapped) once, for the pool's sizing and the runner;
    None when ``model_path`` is no GGUF (the runner then names the mistake)."""
    from ..model.gguf_conversion import find_gguf, gguf_source
    from ..model.gguf_weights import MappedGGUF

    path = find_gguf(model_path) or gguf_source(model_path)
    return None if path is None else MappedGGUF(path)


def _weights_format(quantization: str | None, gguf: Any, dtype: str) -> str:
    """E.g. ``gguf blocks mapped from SmolLM2.Q4_1.gguf`` or ``float32``."""
    if quantization == "gguf" and gguf is not None:
        return f"as gguf blocks mapped from {gguf.path.name}"
    return f"as {quantization}" if quantization else f"as {dtype}"


def check_tp_split(args: ServerArgs) -> None:
    """Raise :class:`TensorParallelError` before any process starts when the model's heads
    or MLP do not split over ``tp_size`` (the message lists the sizes that do)."""
    if args.tp_size == 1:
        return
    from ..model.model_config import ModelConfig
    from ..model.parallel.sharding import TPSharding

    TPSharding.create(ModelConfig.from_folder(args.model_path), args.tp_size, 0)
