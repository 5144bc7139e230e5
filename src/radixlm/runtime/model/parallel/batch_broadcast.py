"""Rank 0 sends each step's :class:`ForwardBatch` to the other ranks over the gloo group.

Two broadcasts per step: a fixed-size int64 header (command, table shape, field lengths), then
every index tensor of the batch flattened into one int64 payload. The receivers rebuild an
identical batch, so every rank runs the same forward on its own shard and KV pool. No
sampling happens off rank 0: the other ranks' logits are dropped.
"""

from __future__ import annotations

import torch
import torch.distributed as dist

from ..forward_batch import ForwardBatch
from .process_group import TPGroup

FORWARD, STOP = 0, 1
# 1-D int64 fields of a ForwardBatch, in payload order (seq_slots [B, L] goes first).
_FIELDS = ("input_ids", "positions", "out_cache_loc", "seq_lens", "ext_lens", "logits_rows",
           "dec_reqs", "ext_reqs", "dec_rows", "ext_rows")
_HEADER = 5 + len(_FIELDS)  # command, page size, B, L, one length per field, indptr length


def _header(cmd: int, page_size: int = 0, shape: tuple[int, int] = (0, 0),
            lens: list[int] | None = None) -> torch.Tensor:
    lens = lens or [0] * (len(_FIELDS) + 1)
    return torch.tensor([cmd, page_size, *shape, *lens], dtype=torch.int64)


def send_batch(group: TPGroup, batch: ForwardBatch) -> None:
    """Rank 0: broadcast ``batch`` (blocks until every rank has it)."""
    parts = [batch.seq_slots.reshape(-1)] + [getattr(batch, f) for f in _FIELDS]
    parts = [p.to("cpu", torch.int64) for p in parts]
    parts.append(torch.tensor(batch.logits_indptr, dtype=torch.int64))
    header = _header(FORWARD, batch.page_size, tuple(batch.seq_slots.shape),
                     [p.numel() for p in parts[1:]])
    dist.broadcast(header, src=0, group=group.cpu_group)
    dist.broadcast(torch.cat(parts), src=0, group=group.cpu_group)


def send_stop(group: TPGroup) -> None:
    """Rank 0: tell the workers to leave their loop."""
    dist.broadcast(_header(STOP), src=0, group=group.cpu_group)


def recv_batch(
    group: TPGroup, device: torch.device, workspace: dict[str, torch.Tensor] | None = None
) -> ForwardBatch | None:
    """Other ranks: wait for the next batch; None when rank 0 says stop."""
    header = torch.empty(_HEADER, dtype=torch.int64)
    dist.broadcast(header, src=0, group=group.cpu_group)
    cmd, page_size, b, length, *lens = header.tolist()
    if cmd == STOP:
        return None
    payload = torch.empty(b * length + sum(lens), dtype=torch.int64)
    dist.broadcast(payload, src=0, group=group.cpu_group)
    slots, *fields, indptr = payload.split([b * length, *lens])
    values = {name: t.to(device) for name, t in zip(_FIELDS, fields)}
    return ForwardBatch(
        seq_slots=slots.reshape(b, length).to(device), page_size=page_size,
        logits_indptr=indptr.tolist(), workspace=workspace, **values)
