"""Tensor-parallel worker processes: ranks other than 0 (no scheduler, no API).

On node 0 the engine launcher starts ranks ``1 .. tp/nnodes - 1`` next to the scheduler
(rank 0). On node ``k > 0``, ``radixlm serve --node-rank k`` runs only
:func:`run_worker_node`: it starts that node's ranks and waits for them. A worker that loses a
peer (a rank was killed) raises out of its collective and exits non-zero; so does the node.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import sys
import traceback
from multiprocessing.connection import Connection

from ... import env
from ..server_args import ServerArgs
from . import ipc

logger = logging.getLogger(__name__)


def run_tp_worker_process(args: ServerArgs, rank: int, ready: Connection | None) -> None:
    """Process entry point of TP rank ``rank`` > 0."""
    from ..model.parallel.process_group import exit_without_teardown
    from ..model.parallel.tp_worker import serve_forwards
    from .runner_setup import load_runner

    ipc.die_with_parent()
    logging.basicConfig(level=env.log_level(), format=f"%(asctime)s tp{rank} %(message)s")
    try:
        runner, _, _ = load_runner(args, rank)
    except Exception as exc:
        if ready is not None:
            ready.send({"status": "error", "message": f"rank {rank}: {type(exc).__name__}: "
                                                      f"{exc}"})
        raise SystemExit(1) from exc
    if ready is not None:
        ready.send({"status": "ready"})
    try:
        steps = serve_forwards(runner)
    except Exception as exc:  # a peer died or the group broke: this rank cannot continue
        logger.error("rank %d: tensor-parallel group failed: %s: %s\n%s", rank,
                     type(exc).__name__, exc, traceback.format_exc())
        raise SystemExit(1) from exc
    logger.info("rank %d: stopped by rank 0 after %d forwards", rank, steps)
    exit_without_teardown()


def node_ranks(args: ServerArgs) -> range:
    """The TP ranks that run on this node (node 0's first one is the scheduler's)."""
    per_node = args.tp_size // args.nnodes
    return range(args.node_rank * per_node, (args.node_rank + 1) * per_node)


def run_worker_node(args: ServerArgs) -> int:
    """``radixlm serve --node-rank k`` (k > 0): run this node's TP ranks until they end;
    the exit status is non-zero when any failed."""
    from .runner_setup import check_tp_split

    args = args.with_local_checkpoint()
    check_tp_split(args)
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=run_tp_worker_process, args=(args, rank, None),
                         name=f"radixlm-tp{rank}") for rank in node_ranks(args)]
    for p in procs:
        p.start()
    logger.info("node %d: TP ranks %s joining %s", args.node_rank, list(node_ranks(args)),
                args.dist_init_addr)
    try:
        for p in procs:
            p.join()
    except KeyboardInterrupt:
        for p in procs:
            p.terminate()
        for p in procs:
            p.join(timeout=10)
    codes = [p.exitcode for p in procs]
    if any(code != 0 for code in codes):
        print(f"radixlm: node {args.node_rank}: TP rank exit codes {codes}", file=sys.stderr)
        return 1
    return 0
