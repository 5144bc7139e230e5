"""Test helpers for tensor parallelism: run a job on a TP group of spawned processes.

Rank 0 runs ``job(runner)`` (a picklable, module-level callable) and its result comes back;
the other ranks serve forwards until rank 0 stops them. The rendezvous port is chosen free at
run time.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from typing import Any

import torch
import torch.multiprocessing as tmp

from ..runtime.memory.page_allocator import pages_of
from ..runtime.model.model_runner import ModelRunner, RunnerConfig
from ..runtime.wire.ipc import free_tcp_port


def _rank_main(rank: int, tp_size: int, addr: str, model_path: str, config: RunnerConfig,
               job: Callable[[ModelRunner], Any], results: Any, left: Any) -> None:
    from ..runtime.model.parallel.batch_broadcast import send_stop
    from ..runtime.model.parallel.process_group import (
        TPGroupConfig,
        exit_without_teardown,
        init_tp_group,
    )
    from ..runtime.model.parallel.tp_worker import serve_forwards

    torch.set_num_threads(1)
    group = init_tp_group(TPGroupConfig(tp_size=tp_size, rank=rank, dist_init_addr=addr))
    runner = ModelRunner(model_path, config, tp_group=group)
    if rank == 0:
        buf = io.BytesIO()  # bytes, not shared-memory tensors: rank 0 exits right after
        torch.save(job(runner), buf)
        results.put(buf.getvalue())
        send_stop(group)
        for _ in range(tp_size - 1):  # rank 0 hosts the store: it leaves last
            left.get()
    else:
        serve_forwards(runner)  # raises (a failed rank) if the group breaks
        left.put(rank)
    # No gloo teardown on any rank: it can abort in C++ against a peer's closed sockets
    # (see exit_without_teardown); the OS closes them.
    exit_without_teardown()


def run_tensor_parallel(model_path: str, tp_size: int, job: Callable[[ModelRunner], Any],
                        config: RunnerConfig | None = None) -> Any:
    """``job(runner)`` on rank 0 of a ``tp_size``-process gloo group (CPU); its result."""
    ctx = tmp.get_context("spawn")
    results, left = ctx.SimpleQueue(), ctx.SimpleQueue()
    addr = f"127.0.0.1:{free_tcp_port()}"
    procs = tmp.start_processes(_rank_main, args=(tp_size, addr, str(model_path),
                                                  config or RunnerConfig(), job, results, left),
                                nprocs=tp_size, join=False, start_method="spawn")
    result = None
    while not procs.join(timeout=0.2):  # raises if a rank failed
        if result is None and not results.empty():
            result = results.get()  # read while rank 0 lives: a big result fills the pipe
    return torch.load(io.BytesIO(results.get() if result is None else result))


def prefill_logits_and_greedy(prompts: list[list[int]], max_new_tokens: int,
                              runner: ModelRunner) -> tuple[list[torch.Tensor], list[list[int]]]:
    """A job for :func:`run_tensor_parallel`: every prompt row's logits, then greedy tokens."""
    from ..runtime.model.forward_batch import SeqSpec
    from .greedy import greedy_generate

    specs = []
    for ids in prompts:
        slots, _ = runner.allocator.extend_slots([], len(ids), True)
        specs.append(SeqSpec(ids, slots, logits_start=0))
    logits = runner.forward(specs)
    for spec in specs:
        runner.allocator.free(pages_of(list(spec.kv_slots), runner.allocator.page_size))
    rows = [len(p) for p in prompts]
    return list(logits.split(rows)), greedy_generate(runner, prompts, max_new_tokens)
