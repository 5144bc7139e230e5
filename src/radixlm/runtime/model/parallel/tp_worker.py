"""A non-zero tensor-parallel rank's loop: receive rank 0's batch, run the same forward.

The worker never schedules or samples: it holds its shard and its own KV pool, and its
collectives pair with rank 0's. It leaves when rank 0 broadcasts stop, and raises when a peer
dies (gloo reports the closed connection), so the process exits non-zero.
"""

from __future__ import annotations

from ..model_runner import ModelRunner
from .batch_broadcast import recv_batch


def serve_forwards(runner: ModelRunner) -> int:
    """Run forwards until rank 0 says stop; returns how many ran."""
    group = runner.tp_group
    if group is None or group.is_leader:
        raise ValueError("serve_forwards runs on a non-zero rank of a tensor-parallel group")
    steps = 0
    while True:
        batch = recv_batch(group, runner.device, runner.workspace)
        if batch is None:
            return steps
        runner.forward(batch)  # logits dropped: rank 0 samples
        steps += 1
