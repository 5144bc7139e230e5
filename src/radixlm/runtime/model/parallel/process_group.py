"""The tensor-parallel process group: one member per rank, over every node.

Model collectives (all-reduce, all-gather) run on ``device_group``: NCCL on CUDA, gloo on CPU.
The scheduler's batch broadcast runs on ``cpu_group`` (always gloo), so an idle worker waits on
a socket rather than spinning a GPU stream. Rank ``r`` of ``tp_size`` lives on node
``r // (tp_size // nnodes)``; rendezvous is a TCP store at ``dist_init_addr`` (rank 0 listens).
"""

from __future__ import annotations

import datetime
import logging
import os
import sys
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

# Workers block in a broadcast while the engine is idle: the timeout must outlast any idle
# spell. A dead peer is noticed at once anyway (its socket closes).
IDLE_TIMEOUT = datetime.timedelta(days=365)


@dataclass(frozen=True)
class TPGroupConfig:
    """Where this process sits in the tensor-parallel group; validated on construction."""

    tp_size: int
    rank: int
    dist_init_addr: str  # host:port of rank 0's rendezvous store
    device: str = "cpu"
    nnodes: int = 1

    def __post_init__(self) -> None:
        if self.tp_size < 1 or not 0 <= self.rank < self.tp_size:
            raise ValueError(f"need tp_size >= 1 and 0 <= rank < tp_size, got "
                             f"{self.tp_size}, {self.rank}")
        if self.nnodes < 1 or self.tp_size % self.nnodes:
            raise ValueError(f"tp_size ({self.tp_size}) must be a multiple of nnodes "
                             f"({self.nnodes})")
        split_host_port(self.dist_init_addr)

    @property
    def ranks_per_node(self) -> int:
        return self.tp_size // self.nnodes

    @property
    def local_rank(self) -> int:
        """Index of this rank on its node (its CUDA device ordinal)."""
        return self.rank % self.ranks_per_node

    @property
    def backend(self) -> str:
        return "nccl" if self.device.startswith("cuda") else "gloo"


def split_host_port(addr: str) -> tuple[str, int]:
    """``"host:port"`` -> (host, port), with a clear error for anything else."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"dist_init_addr must be host:port (e.g. 10.0.0.1:5000), got {addr!r}")
    return host.strip("[]"), int(port)


@dataclass(frozen=True)
class TPGroup:
    """This process's membership: rank, size and the two process groups."""

    rank: int
    size: int
    device_group: Any  # ProcessGroup for model collectives
    cpu_group: Any  # gloo ProcessGroup for batch broadcast

    @property
    def is_leader(self) -> bool:
        return self.rank == 0

    def all_reduce(self, x: torch.Tensor) -> torch.Tensor:
        """Sum ``x`` over the ranks, in place."""
        dist.all_reduce(x, group=self.device_group)
        return x

    def all_gather_last_dim(self, x: torch.Tensor) -> torch.Tensor:
        """Concatenate every rank's ``x`` along the last dimension, in rank order."""
        parts = [torch.empty_like(x) for _ in range(self.size)]
        dist.all_gather(parts, x.contiguous(), group=self.device_group)
        return torch.cat(parts, dim=-1)


def init_tp_group(cfg: TPGroupConfig) -> TPGroup:
    """Join the group (blocks until every rank has joined); idempotent per process."""
    if cfg.device.startswith("cuda"):
        torch.cuda.set_device(cfg.local_rank)
    host, port = split_host_port(cfg.dist_init_addr)
    if not dist.is_initialized():
        dist.init_process_group(
            backend=cfg.backend, init_method=f"tcp://{host}:{port}", world_size=cfg.tp_size,
            rank=cfg.rank, timeout=IDLE_TIMEOUT)
    cpu_group = dist.new_group(backend="gloo", timeout=IDLE_TIMEOUT) \
        if cfg.backend != "gloo" else dist.group.WORLD
    return TPGroup(rank=cfg.rank, size=cfg.tp_size, device_group=dist.group.WORLD,
                   cpu_group=cpu_group)


def destroy_tp_group() -> None:
    """Leave the group (at shutdown)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def exit_without_teardown(code: int = 0) -> None:
    """End a stopped non-zero rank with ``code`` without tearing the process group down.

    Rank 0 stops first; a gloo teardown here (``destroy_process_group`` or the interpreter's
    own exit) can then race gloo's threads against the closed peer sockets and abort the
    process in C++ (``terminate called without an active exception``, exit -6), which reads
    as a failed rank. Nothing is left to flush but the logs and stdio, and the OS closes the
    sockets, so the rank leaves at once."""
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def min_over_ranks(group: TPGroup, value: int) -> int:
    """The smallest ``value`` any rank holds (e.g. the KV pool size every rank can fit)."""
    t = torch.tensor([value], dtype=torch.int64)
    dist.all_reduce(t, op=dist.ReduceOp.MIN, group=group.cpu_group)
    return int(t.item())
