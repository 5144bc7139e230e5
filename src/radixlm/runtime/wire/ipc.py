"""ZeroMQ endpoints and process plumbing shared by the engine's processes.

Endpoints are ``ipc://`` paths in a private temporary folder that the parent creates and passes
to its children (a folder made at import time would be made again, differently, in a spawned
child, and the two sides would never meet). Receivers bind, senders connect.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import tempfile
import threading
import time
from dataclasses import dataclass

import msgspec
import zmq

from . import messages

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Endpoints:
    scheduler: str  # tokenizer manager -> scheduler
    detokenizer: str  # scheduler -> detokenizer
    tokenizer: str  # detokenizer -> tokenizer manager

    @classmethod
    def create(cls) -> tuple[Endpoints, str]:
        """Fresh endpoints in a new private folder; returns them and the folder."""
        folder = tempfile.mkdtemp(prefix="radixlm-ipc-")
        os.chmod(folder, 0o700)
        return cls(*(f"ipc://{folder}/{n}" for n in ("sched", "detok", "tok"))), folder


def bind_pull(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = ctx.socket(zmq.PULL)
    sock.bind(endpoint)
    return sock


def connect_push(ctx: zmq.Context, endpoint: str) -> zmq.Socket:
    sock = ctx.socket(zmq.PUSH)
    sock.setsockopt(zmq.LINGER, 1000)
    sock.connect(endpoint)
    return sock


def send(sock: zmq.Socket, msg: messages.Message) -> None:
    sock.send(messages.encode(msg), copy=False)


def try_decode(frame: bytes) -> messages.Message | None:
    """Decode a frame; a malformed one is logged and dropped (returns None)."""
    try:
        return messages.decode(frame)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        logger.warning("dropping malformed message (%d bytes): %s", len(frame), exc)
        return None


def recv_all(sock: zmq.Socket, timeout_ms: int) -> list[messages.Message]:
    """Every message waiting on ``sock``, blocking up to ``timeout_ms`` for the first."""
    out: list[messages.Message] = []
    if timeout_ms and not sock.poll(timeout_ms):
        return out
    while True:
        try:
            frame = sock.recv(zmq.NOBLOCK)
        except zmq.Again:
            return out
        msg = try_decode(frame)
        if msg is not None:
            out.append(msg)


def die_with_parent() -> None:
    """In a child process: exit when the parent dies (prctl on Linux, plus a watchdog).

    Ctrl-C is the parent's to handle: a terminal sends SIGINT to the whole process group, and
    children that raised KeyboardInterrupt mid-step would linger in socket teardown and print
    tracebacks. Ignoring it here lets the parent stop them at once (SIGTERM, then SIGKILL).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass

    def watch() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, daemon=True, name="parent-watchdog").start()


def free_tcp_port(host: str = "127.0.0.1") -> int:
    """A TCP port free on ``host`` right now (rendezvous addresses picked at run time)."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]
