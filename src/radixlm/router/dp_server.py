"""``radixlm serve --dp-size N``: N ``radixlm serve`` replicas behind the HTTP router.

Design: each replica is an ordinary single-replica server process (its own tokenizer manager,
scheduler, KV pool and radix cache; TP if ``--tp-size > 1``) on a free loopback port, and this
process runs the same router as ``radixlm router`` in front of them on ``--host``/``--port``
with ``--load-balance-method`` as the policy. Streaming, aborts (by rid, to the replica holding
it), ``/metrics`` and ``/get_server_info`` (aggregated) are therefore the router's, tested once
for both commands; a replica whose engine dies fails its in-flight requests and exits (the
server's rule), the router takes it out of rotation and the others keep serving.
"""

from __future__ import annotations

import ctypes
import dataclasses
import logging
import signal
import subprocess
import sys
import time

import requests

from ..runtime.server_args import ServerArgs
from ..runtime.wire.ipc import free_tcp_port
from .http_router import launch_router
from .router_args import RouterArgs

logger = logging.getLogger("radixlm.router")
READY_POLL_S = 0.3
READY_POLLS = 6000  # 30 minutes of polling while the replicas load
REPLICA_HEALTH_INTERVAL_S = 1.0  # local replicas: cheap to poll, and a death shows fast
STOP_TIMEOUT_S = 20


def replica_flags(args: ServerArgs) -> list[str]:
    """The ``radixlm serve`` flags of ``args`` (every set value; booleans when true)."""
    flags = []
    for f in dataclasses.fields(args):
        value = getattr(args, f.name)
        if value is None or value is False:
            continue
        flag = "--" + f.name.replace("_", "-")
        flags += [flag] if value is True else [flag, str(value)]
    return flags


def _tie_to_parent() -> None:
    """Runs in each replica before exec: SIGTERM it when this process dies (Linux prctl), so
    a killed ``serve --dp-size`` leaves no replica serving (each then stops its engine)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _start_replicas(args: ServerArgs) -> tuple[list[subprocess.Popen], list[str]]:
    procs, urls = [], []
    for _ in range(args.dp_size):
        port = free_tcp_port()
        replica = dataclasses.replace(args, dp_size=1, host="127.0.0.1", port=port)
        procs.append(subprocess.Popen([sys.executable, "-m", "radixlm.launch_server",
                                       *replica_flags(replica)],
                                      preexec_fn=_tie_to_parent))
        urls.append(f"http://127.0.0.1:{port}")
    return procs, urls


def _wait_ready(procs: list[subprocess.Popen], urls: list[str]) -> None:
    pending = dict(enumerate(urls))
    for _ in range(READY_POLLS):
        for i, url in list(pending.items()):
            if procs[i].poll() is not None:
                raise SystemExit(f"dp replica {i} ({url}) exited with code "
                                 f"{procs[i].returncode} while starting (its log is above)")
            try:
                if requests.get(url + "/health", timeout=1).ok:
                    del pending[i]
            except requests.RequestException:
                pass
        if not pending:
            return
        time.sleep(READY_POLL_S)
    raise SystemExit(f"dp replicas {sorted(pending)} did not become healthy")


def stop_processes(procs: list[subprocess.Popen], timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Terminate every process still running, wait up to ``timeout_s`` each, kill the rest."""
    for proc in procs:
        if proc.poll() is None:
            proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def serve_data_parallel(args: ServerArgs) -> int:
    """Start ``args.dp_size`` replicas, route over them until interrupted, stop them."""
    args = args.with_local_checkpoint()  # a .gguf's folder is made here, not per replica
    procs, urls = _start_replicas(args)
    try:
        _wait_ready(procs, urls)
        logger.info("dp replicas ready: %s", urls)
        return launch_router(RouterArgs(
            worker_urls=tuple(urls), policy=args.load_balance_method,
            cache_threshold=args.cache_threshold,
            balance_abs_threshold=args.balance_abs_threshold, host=args.host,
            port=args.port, max_payload_size=args.max_request_bytes,
            health_check_interval_secs=REPLICA_HEALTH_INTERVAL_S))
    finally:
        stop_processes(procs)
