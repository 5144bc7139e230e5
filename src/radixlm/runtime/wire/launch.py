"""Starting and stopping the engine's child processes (scheduler and detokenizer)."""

from __future__ import annotations

import dataclasses
import logging
import multiprocessing as mp
import shutil
import signal
from dataclasses import dataclass, field
from typing import Any

from ..server_args import ServerArgs
from .ipc import Endpoints, free_tcp_port

logger = logging.getLogger(__name__)
STARTUP_TIMEOUT_S = 600.0


class EngineStartError(RuntimeError):
    """A child process failed to start; the message carries its error."""


@dataclass
class EngineProcesses:
    endpoints: Endpoints
    ipc_dir: str
    procs: dict[str, Any]
    info: dict[str, Any] = field(default_factory=dict)

    def health(self) -> str | None:
        """None while every child is alive, else which one died and how (its exit code)."""
        for name, p in self.procs.items():
            if not p.is_alive():
                return describe_exit(name, p)
        return None

    def describe(self) -> str:
        """Every child's status in words, e.g. for the log when the engine died."""
        return "; ".join(describe_exit(name, p) for name, p in self.procs.items())

    def wait_for_a_death(self, timeout: float) -> None:
        """Wait up to ``timeout`` s until some child has exited (a crashing child first sends
        its error, then exits: waiting lets its real exit code be reported)."""
        from multiprocessing.connection import wait

        if all(p.is_alive() for p in self.procs.values()):
            wait([p.sentinel for p in self.procs.values()], timeout)

    def shutdown(self) -> None:
        # The scheduler first: on SIGTERM it finishes its step and tells its TP workers to
        # stop, so they must still be alive then.
        first = [p for name, p in self.procs.items() if name == "scheduler"]
        rest = [p for name, p in self.procs.items() if name != "scheduler"]
        for group in (first, rest):
            for p in group:
                if p.is_alive():
                    p.terminate()
            for p in group:
                p.join(timeout=5)
                if p.is_alive():
                    p.kill()
                    p.join(timeout=5)
        shutil.rmtree(self.ipc_dir, ignore_errors=True)


def describe_exit(name: str, proc: Any) -> str:
    """A child's status in words, with its real exit code (multiprocessing reports death by
    signal N as exit code -N), e.g. ``scheduler process exited: killed by SIGKILL (exit code
    -9, pid 123)``."""
    code = proc.exitcode
    if code is None:
        return f"{name} process is running (pid {proc.pid})"
    if code < 0:
        try:
            sig = signal.Signals(-code).name
        except ValueError:
            sig = f"signal {-code}"
        return f"{name} process exited: killed by {sig} (exit code {code}, pid {proc.pid})"
    return f"{name} process exited with code {code} (pid {proc.pid})"


def _wait_ready(name: str, conn: Any, proc: Any) -> dict[str, Any]:
    if not conn.poll(STARTUP_TIMEOUT_S):
        raise EngineStartError(f"{name} did not start within {STARTUP_TIMEOUT_S:.0f} s")
    try:
        msg = conn.recv()
    except EOFError:
        raise EngineStartError(f"{name} exited during start-up (code {proc.exitcode})") from None
    if msg.get("status") != "ready":
        raise EngineStartError(f"{name} failed to start: {msg.get('message')}")
    return msg


def _run_scheduler_process(*args: Any) -> None:
    """The scheduler's spawn target, imported in the child alone: spawn pickles a target by
    its module, and scheduler_process imports torch (~220 MiB), which the caller's process
    (the Engine's, the HTTP server's) never needs."""
    from .scheduler_process import run_scheduler_process

    run_scheduler_process(*args)


def launch_engine_processes(args: ServerArgs) -> EngineProcesses:
    """Spawn the scheduler and detokenizer; return once both are ready (or raise)."""
    from .detokenizer import run_detokenizer_process
    from .runner_setup import check_tp_split
    from .tp_worker_process import node_ranks, run_tp_worker_process

    if args.node_rank != 0:
        raise EngineStartError(f"node_rank {args.node_rank} runs tensor-parallel workers only "
                               "(`radixlm serve --node-rank N` does); the engine runs on node 0")
    check_tp_split(args)
    if args.tp_size > 1 and args.dist_init_addr is None:  # single node: a loopback rendezvous
        args = dataclasses.replace(args, dist_init_addr=f"127.0.0.1:{free_tcp_port()}")
    endpoints, folder = Endpoints.create()
    ctx = mp.get_context("spawn")
    targets = {
        "scheduler": (_run_scheduler_process, (args, endpoints)),
        "detokenizer": (run_detokenizer_process, (args.resolved_tokenizer_path, endpoints)),
    }
    for rank in list(node_ranks(args))[1:]:  # rank 0 is the scheduler's runner
        targets[f"tp-worker-{rank}"] = (run_tp_worker_process, (args, rank))
    procs: dict[str, Any] = {}
    conns: dict[str, Any] = {}
    for name, (fn, fn_args) in targets.items():
        reader, writer = ctx.Pipe(duplex=False)
        p = ctx.Process(target=fn, args=(*fn_args, writer), name=f"radixlm-{name}",
                        daemon=True)
        p.start()
        writer.close()
        procs[name], conns[name] = p, reader
    handle = EngineProcesses(endpoints, folder, procs)
    try:
        for name in procs:
            handle.info.update(_wait_ready(name, conns[name], procs[name]))
    except BaseException:
        handle.shutdown()
        raise
    handle.info.pop("status", None)
    return handle
