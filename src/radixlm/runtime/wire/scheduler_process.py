"""The scheduler process: receive requests, step the scheduler, send token outputs.

A request-level error (bad prompt, bad constraint) is answered with an ``ErrorOut`` for that
request and the loop carries on, as is an internal error while handling one request (see
``output_processor.py``). An exception outside any one request (the forward, the KV manager)
fails every in-flight request with the error (so no client hangs), sends a fatal ``ErrorOut``
and ends the process with exit code :data:`CRASH_EXIT_CODE`, so its parent sees a crash.
"""

from __future__ import annotations

import gc
import logging
import signal
import sys
import threading
import traceback
from multiprocessing.connection import Connection

import msgspec
import zmq

from ... import env
from ..gc_policy import GcPauseStats, freeze_startup_heap
from ..load_memory import (
    LoadSteps,
    limit_malloc_arenas,
    load_server_tokenizer,
    release_freed_heap,
)
from ..scheduling.request import RequestError
from ..server_args import ServerArgs
from . import ipc
from .messages import (
    AbortReq,
    ControlOut,
    ControlReq,
    ErrorOut,
    GenerateReq,
    Message,
    ReqOut,
    TokenBatchOut,
)

logger = logging.getLogger(__name__)
IDLE_POLL_MS = 200
CRASH_EXIT_CODE = 1  # a crash after start-up (a clean return would read as exit code 0)
AUDIT_EVERY_IDLE_POLLS = 25


def _load(args: ServerArgs, steps: LoadSteps):  # noqa: ANN202 - (Scheduler, info dict)
    from ..scheduling.scheduler import Scheduler
    from .runner_setup import load_runner

    # The tokenizer first: parsing tokenizer.json peaks at several times what the tokenizer
    # keeps (Gemma 3: +460 MiB, keeping 65), and that peak is lower before the model is in.
    tokenizer = load_server_tokenizer(args.resolved_tokenizer_path)
    steps.mark("tokenizer")
    runner, pool, weights = load_runner(args, rank=0)  # rank 0 of the TP group, if any
    release_freed_heap()  # the GGUF reader's metadata
    steps.mark("model")
    scheduler = Scheduler(args, runner, tokenizer)
    info = {"max_total_tokens": runner.allocator.num_pages * args.page_size,
            "kv_pool_bytes": pool.bytes, "weights_bytes": weights,
            "max_context": runner.max_context, "vocab_size": runner.vocab_size,
            "eos_token_ids": sorted(scheduler.eos_ids)}
    return scheduler, info


def run_scheduler_process(args: ServerArgs, endpoints: ipc.Endpoints,
                          ready: Connection) -> None:
    """Process entry point (spawned by the engine launcher)."""
    limit_malloc_arenas()  # before any thread starts (the watchdog, sockets, grammar worker)
    ipc.die_with_parent()
    logging.basicConfig(level=env.log_level(), format="%(asctime)s scheduler %(message)s")
    steps = LoadSteps()
    try:
        scheduler, info = _load(args, steps)
    except Exception as exc:  # report the load failure to the launcher, then exit
        ready.send({"status": "error", "message": f"{type(exc).__name__}: {exc}"})
        sys.exit(CRASH_EXIT_CODE)
    if not args.disable_gc_freeze:  # start-up objects out of every later scan
        scheduler.grammar.prepare()  # the grammar vocabulary too: built lazily otherwise
        logger.info("gc: %d start-up objects frozen, thresholds %s", freeze_startup_heap(),
                    gc.get_threshold())
    release_freed_heap()
    steps.mark("scheduler")
    logger.info("scheduler memory: %s", steps.describe())
    gc_pauses = GcPauseStats()
    gc_pauses.install()
    ctx = zmq.Context()
    inbox = ipc.bind_pull(ctx, endpoints.scheduler)
    outbox = ipc.connect_push(ctx, endpoints.detokenizer)
    ready.send({"status": "ready", **info})
    crashed = False
    try:
        _loop(scheduler, inbox, outbox, gc_pauses)
        tp_group = scheduler.runner.tp_group
        if tp_group is not None:  # stopped cleanly: release the TP workers too
            from ..model.parallel.batch_broadcast import send_stop

            send_stop(tp_group)
    except Exception as exc:
        message = f"scheduler crashed: {type(exc).__name__}: {exc}"
        logger.error("%s\n%s", message, traceback.format_exc())
        for rid in list(scheduler.reqs):
            ipc.send(outbox, ErrorOut(rid=rid, message=message, fatal=True, code="internal"))
        ipc.send(outbox, ErrorOut(rid=None, message=message, fatal=True, code="internal"))
        crashed = True
    finally:
        outbox.close(linger=2000)  # let the errors out before the process ends
        inbox.close()
        ctx.term()
        gc_pauses.uninstall()
        gc.unfreeze()  # frozen objects are never finalized: native bindings report leaks
    if crashed:  # (a clean return would read as exit code 0)
        sys.exit(CRASH_EXIT_CODE)


def _stop_on_sigterm() -> threading.Event:
    """SIGTERM ends the loop between steps (not mid-collective), so TP workers can be told."""
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    return stop


def _loop(scheduler, inbox: zmq.Socket, outbox: zmq.Socket,  # noqa: ANN001
          gc_pauses: GcPauseStats) -> None:
    idle_polls = 0
    stop = _stop_on_sigterm()
    while not stop.is_set():
        # Block when idle; poll briefly while only grammar compiles are pending.
        timeout = 0 if scheduler.can_step() else (5 if scheduler.has_work() else IDLE_POLL_MS)
        for msg in ipc.recv_all(inbox, timeout):
            reply = _with_gc_info(_handle(scheduler, msg), msg, gc_pauses)
            if reply is not None:
                ipc.send(outbox, reply)
        if scheduler.has_work():
            idle_polls = 0
            outs = scheduler.step()
            for err in scheduler.errors:
                ipc.send(outbox, err)
            scheduler.errors.clear()
            if outs:
                ipc.send(outbox, TokenBatchOut(outs=outs))
        else:
            idle_polls += 1
            if idle_polls % AUDIT_EVERY_IDLE_POLLS == 0:
                scheduler.idle_audit()


def _handle(scheduler, msg: Message) -> Message | None:  # noqa: ANN001
    """Apply one incoming message; an exception while doing so fails that request alone."""
    if isinstance(msg, GenerateReq):
        try:
            scheduler.add_request(msg)
        except RequestError as exc:
            return ErrorOut(rid=msg.rid, message=str(exc))
        except Exception as exc:  # a bug admitting this request: fail it, not the engine
            return _request_fault(scheduler, msg.rid, "admitting the request", exc)
        return None
    if isinstance(msg, AbortReq):
        try:
            out = scheduler.abort(msg.rid)
        except Exception as exc:
            return _request_fault(scheduler, msg.rid, "aborting the request", exc)
        return TokenBatchOut(outs=[out]) if isinstance(out, ReqOut) else None
    if isinstance(msg, ControlReq):
        try:
            return scheduler.control(msg)
        except Exception as exc:  # a control request must never take the scheduler down
            return ControlOut(msg.cid, False, error=f"{type(exc).__name__}: {exc}")
    logger.warning("scheduler: unexpected message %s dropped", type(msg).__name__)
    return None


def _with_gc_info(reply: Message | None, msg: Message,
                  gc_pauses: GcPauseStats) -> Message | None:
    """A ``server_info`` answer gains this process's garbage collector figures."""
    if (isinstance(msg, ControlReq) and msg.kind == "server_info"
            and isinstance(reply, ControlOut) and reply.ok):
        return msgspec.structs.replace(reply, data={**reply.data, **gc_pauses.summary()})
    return reply


def _request_fault(scheduler, rid: str, stage: str, exc: Exception) -> ErrorOut:  # noqa: ANN001
    """Drop ``rid`` after an internal error and say so (logged with the traceback)."""
    message = f"internal error while {stage}: {type(exc).__name__}: {exc}"
    logger.error("request %s failed: %s", rid, message, exc_info=exc)
    scheduler.fail(rid)
    return ErrorOut(rid=rid, message=message, code="internal")
