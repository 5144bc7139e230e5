"""The API side of the engine: tokenizes requests, tracks them, and assembles their results.

Lives in the caller's process on one asyncio loop (the Engine's private loop thread, or the
HTTP server's loop). It sends tokenized requests to the scheduler and receives text from the
detokenizer; each in-flight sequence has a :class:`ReqState` that collects text, ids, meta info
and logprobs. A cancelled caller (a client that went away) aborts its requests.

A dead engine is never served: when a child process dies (found by polling its status every
:data:`WATCH_INTERVAL_S`) or the scheduler reports a fatal error, the manager logs it, fails
every in-flight request and control call, refuses new ones with :class:`EngineDeadError`, and
calls its ``on_dead`` hooks once (the HTTP server exits on it).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import zmq
import zmq.asyncio

from ..server_args import ServerArgs
from ..wire import ipc
from ..wire.messages import (
    AbortReq,
    ControlKind,
    ControlOut,
    ControlReq,
    ErrorOut,
    GenerateReq,
    TextBatchOut,
    TextOut,
    finish_reason_json,
)
from .generate_request import (
    GenerateItem,
    GenerateRequest,
    RequestValidationError,
    parse_generate_request,
)
from .request_limits import RequestLimits

logger = logging.getLogger(__name__)
WATCH_INTERVAL_S = 0.25  # how often the children's status is checked


class GenerateError(RuntimeError):
    """The engine refused or failed a request; the message says why.

    ``code``: ``invalid_request`` (the request's fault: HTTP 400), ``overloaded`` (retry
    later: 503) or ``internal`` (500).
    """

    def __init__(self, message: str, code: str = "invalid_request") -> None:
        super().__init__(message)
        self.code = code


class EngineDeadError(GenerateError):
    """The engine's scheduler is gone; no request can be served.

    ``in_flight``: the request was running when the engine died (its failure is the engine's
    crash: HTTP 500); otherwise it was refused because the engine is already dead (HTTP 503,
    the service is unavailable)."""

    def __init__(self, message: str, in_flight: bool = False) -> None:
        super().__init__(message, "internal")
        self.in_flight = in_flight


@dataclass
class ReqState:
    item: GenerateItem
    prompt_ids: list[int]
    text: str = ""
    output_ids: list[int] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    finished: bool = False
    error: str | None = None
    error_code: str = "invalid_request"
    created_wall: float = field(default_factory=time.time)
    updated: asyncio.Event = field(default_factory=asyncio.Event)
    created: float = field(default_factory=time.monotonic)
    out_logprobs: list[list[Any]] = field(default_factory=list)
    out_top: list[Any] = field(default_factory=list)
    in_logprobs: list[list[Any]] | None = None
    in_top: list[Any] | None = None
    streamed_logprobs: int = 0  # output logprob entries already sent in stream chunks


class TokenizerManager:
    """Create inside a running loop with :meth:`create`."""

    def __init__(self, args: ServerArgs, endpoints: ipc.Endpoints, tokenizer: Any,
                 health: Callable[[], str | None], limits: RequestLimits | None = None
                 ) -> None:
        self.args = args
        self.limits = limits
        # Tokenizing (and chat templates) run here, off the event loop, so a huge prompt
        # never stalls other requests or /health. One thread: work is done in arrival order.
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="radixlm-tokenize")
        self.tokenizer = tokenizer
        self.endpoints = endpoints
        self._health = health
        self.states: dict[str, ReqState] = {}
        self.controls: dict[str, asyncio.Future[ControlOut]] = {}
        self.dead: str | None = None
        self.ctx = zmq.asyncio.Context()
        self.push = self.ctx.socket(zmq.PUSH)
        self.push.setsockopt(zmq.LINGER, 0)
        self.push.connect(endpoints.scheduler)
        self.pull = self.ctx.socket(zmq.PULL)
        self.pull.bind(endpoints.tokenizer)
        self._tasks: list[asyncio.Task] = []
        # Called with a summary dict when a request ends (metrics, structured logs).
        self.finish_hooks: list[Callable[[dict[str, Any]], None]] = []
        # Called once, with the reason, when the engine dies.
        self.on_dead: list[Callable[[str], None]] = []

    @classmethod
    async def create(cls, args: ServerArgs, endpoints: ipc.Endpoints, tokenizer: Any,
                     health: Callable[[], str | None], limits: RequestLimits | None = None
                     ) -> TokenizerManager:
        tm = cls(args, endpoints, tokenizer, health, limits)
        tm._tasks = [asyncio.create_task(tm._recv_loop()),
                     asyncio.create_task(tm._watch_children())]
        return tm

    async def close(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._worker.shutdown(wait=False, cancel_futures=True)
        self.push.close(0)
        self.pull.close(0)
        self.ctx.term()

    # -- receiving ------------------------------------------------------------------------

    async def _recv_loop(self) -> None:
        try:
            while True:
                msg = ipc.try_decode(await self.pull.recv())
                if isinstance(msg, TextBatchOut):
                    for out in msg.outs:
                        self._on_text_isolated(out)
                elif isinstance(msg, ControlOut):
                    fut = self.controls.pop(msg.cid, None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg)
                elif isinstance(msg, ErrorOut):
                    self._on_error(msg)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # without this loop no result arrives: the engine is dead
            logger.exception("the result receiver failed")
            self._fail_all(f"the API's result receiver failed: {type(exc).__name__}: {exc}")

    async def _watch_children(self) -> None:
        while self.dead is None:
            await asyncio.sleep(WATCH_INTERVAL_S)
            problem = self._health()
            if problem:
                self._fail_all(f"engine process died: {problem}")

    def _on_text_isolated(self, t: TextOut) -> None:
        """Apply one request's text; a failure there fails that request alone."""
        try:
            self._on_text(t)
        except Exception as exc:
            logger.exception("assembling the output of %s failed", t.out.rid)
            self._on_error(ErrorOut(rid=t.out.rid, code="internal", message=f"internal error "
                                    f"while assembling the output: {type(exc).__name__}: {exc}"))

    def _on_text(self, t: TextOut) -> None:
        st = self.states.get(t.out.rid)
        if st is None:
            return
        o = t.out
        if o.rollback:
            del st.output_ids[len(st.output_ids) - o.rollback :]
            del st.out_logprobs[len(st.out_logprobs) - min(o.rollback, len(st.out_logprobs)):]
        st.text = t.text_delta if t.text_reset else st.text + t.text_delta
        st.output_ids.extend(o.new_ids)
        with_text = st.item.return_text_in_logprobs
        st.out_logprobs.extend(self._lp_entry(lp, tid, with_text) for lp, tid in
                               o.output_logprobs)
        st.out_top.extend([self._lp_entry(lp, tid, with_text) for lp, tid in top]
                          for top in o.output_top_logprobs)
        if o.input_logprobs is not None:
            st.in_logprobs = [self._lp_entry(lp, tid, with_text) for lp, tid in o.input_logprobs]
            st.in_top = [None if top is None else
                         [self._lp_entry(lp, tid, with_text) for lp, tid in top]
                         for top in (o.input_top_logprobs or [])]
        st.meta.update(prompt_tokens=o.prompt_tokens, completion_tokens=o.completion_tokens,
                       cached_tokens=o.cached_tokens,
                       finish_reason=finish_reason_json(o.finish_reason))
        if o.forced_tokens:
            st.meta["jump_forward_tokens"] = o.forced_tokens
        if o.first_token_time and "ttft" not in st.meta:
            st.meta["ttft"] = max(o.first_token_time - st.created_wall, 0.0)
        if o.finish_reason is not None:
            st.finished = True
            self._report(st, "ok")
        st.updated.set()

    def _report(self, st: ReqState, status: str) -> None:
        summary = {"rid": st.item.rid, "status": status,
                   "latency": time.monotonic() - st.created, **st.meta}
        for hook in self.finish_hooks:
            try:
                hook(summary)
            except Exception:  # a metrics bug must not break serving
                logger.exception("finish hook failed")

    def _lp_entry(self, lp: float | None, tid: int, with_text: bool) -> list[Any]:
        return [lp, tid, self.tokenizer.decode([tid]) if with_text else None]

    def _on_error(self, e: ErrorOut) -> None:
        if e.rid is None or e.fatal:  # the scheduler crashed: every request fails with it
            self._fail_all(e.message)
            return
        st = self.states.get(e.rid)
        if st is not None:
            st.error, st.error_code, st.finished = e.message, e.code, True
            self._report(st, "error")
            st.updated.set()

    def _fail_all(self, message: str) -> None:
        """The engine is dead: fail everything in flight and tell the hooks (once)."""
        first = self.dead is None
        if first:
            self.dead = message
            logger.error("the engine is dead: %s; failing %d request(s) in flight", message,
                         sum(not st.finished for st in self.states.values()))
        for st in self.states.values():
            if not st.finished:
                st.error, st.error_code, st.finished = message, "internal", True
                st.updated.set()
        for fut in self.controls.values():
            if not fut.done():
                fut.set_exception(EngineDeadError(message))
        for hook in self.on_dead if first else ():
            try:
                hook(message)
            except Exception:  # one hook's bug must not stop the others
                logger.exception("on_dead hook failed")

    # -- sending --------------------------------------------------------------------------

    async def offload(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run blocking text work (tokenizing, chat templates) on the worker thread."""
        return await asyncio.get_running_loop().run_in_executor(self._worker, fn, *args)

    def _tokenize_all(self, items: list[GenerateItem]) -> list[list[int]]:
        """Prompt ids per item (on the worker thread), checked against the model's limits;
        the ``n`` sequences of one prompt share one tokenization."""
        done: dict[str, list[int]] = {}
        out = []
        for item in items:
            if self.limits is not None:
                self.limits.check_text(item)
            if item.input_ids is not None:
                ids = item.input_ids
            else:
                if item.text not in done:
                    done[item.text] = self.tokenizer(item.text).input_ids
                ids = done[item.text]
            if self.limits is not None:
                self.limits.check_tokens(item, ids)
            out.append(ids)
        return out

    def _check_can_admit(self, count: int) -> None:
        if self.dead is not None:
            raise EngineDeadError(f"the engine is not running: {self.dead}")
        if len(self.states) + count > self.args.max_queued_requests:
            raise GenerateError(f"too many requests in flight ({len(self.states)}); retry "
                                f"later", "overloaded")

    async def _send(self, item: GenerateItem, stream: bool, ids: list[int]) -> ReqState:
        self._check_can_admit(1)
        self._check_logit_bias(item)
        # Checked next to the insertion (no await between): a second request with the rid of
        # one in flight would take over its state, and the first would never be answered.
        if item.rid in self.states:
            raise GenerateError(f"rid {item.rid!r} is already used by a request in flight; "
                                f"each request needs a unique rid")
        st = ReqState(item=item, prompt_ids=ids)
        self.states[item.rid] = st
        msg = GenerateReq(
            rid=item.rid, input_ids=ids, sampling=item.sampling,
            return_logprob=item.return_logprob, logprob_start_len=item.logprob_start_len,
            top_logprobs_num=item.top_logprobs_num, stream=stream,
            namespace=item.cache_salt, grammar=item.grammar,
        )
        await self.push.send(ipc.messages.encode(msg))
        return st

    def _check_logit_bias(self, item: GenerateItem) -> None:
        vocab = len(self.tokenizer)
        bad = [k for k in item.sampling.logit_bias or {} if int(k) >= vocab]
        if bad:
            raise GenerateError(f"logit_bias: token ids {bad} are outside the vocabulary "
                                f"(size {vocab})")

    async def abort(self, rid: str) -> None:
        """Abort a sequence by its rid, or all ``n`` sequences of the request given ``rid``."""
        if self.dead is not None:  # a dead scheduler reads nothing
            return
        rids = [rid] if rid in self.states else [
            r for r, st in self.states.items() if st.item.group_rid == rid]
        for r in rids:
            await self.push.send(ipc.messages.encode(AbortReq(rid=r)))

    async def control(self, kind: ControlKind, timeout: float = 30.0, **args: Any) -> ControlOut:
        if self.dead is not None:
            raise EngineDeadError(f"the engine is not running: {self.dead}")
        cid = uuid.uuid4().hex
        fut: asyncio.Future[ControlOut] = asyncio.get_running_loop().create_future()
        self.controls[cid] = fut
        await self.push.send(ipc.messages.encode(ControlReq(cid=cid, kind=kind, args=args)))
        try:
            return await asyncio.wait_for(fut, timeout)
        finally:
            self.controls.pop(cid, None)

    # -- results --------------------------------------------------------------------------

    def _result(self, st: ReqState, stream_delta: bool = False) -> dict[str, Any]:
        """The result so far. ``stream_delta``: a stream chunk, whose output logprobs are
        only those new since the previous chunk (SGLang's streaming contract; clients
        concatenate them), while ``output_token_logprobs_length`` counts all so far."""
        meta = {"id": st.item.rid, **st.meta,
                "e2e_latency": time.monotonic() - st.created}
        meta.setdefault("finish_reason", None)
        if st.item.return_logprob:
            # A jump-forward rollback may have removed entries already streamed.
            start = min(st.streamed_logprobs, len(st.out_logprobs)) if stream_delta else 0
            meta["output_token_logprobs"] = st.out_logprobs[start:]
            meta["output_top_logprobs"] = st.out_top[start:]
            meta["output_token_logprobs_length"] = len(st.out_logprobs)
            if stream_delta:
                st.streamed_logprobs = len(st.out_logprobs)
            meta["input_token_logprobs"] = st.in_logprobs or []
            meta["input_top_logprobs"] = st.in_top or []
        return {"text": st.text, "output_ids": list(st.output_ids), "meta_info": meta}

    async def generate(self, body: dict[str, Any] | GenerateRequest
                       ) -> AsyncIterator[dict[str, Any] | list[dict[str, Any]]]:
        """Yield results: once (final) without streaming, or a snapshot per update with
        streaming (single sequence: a dict; batch: dicts carrying ``index``)."""
        req = body if isinstance(body, GenerateRequest) else parse_generate_request(body)
        states: list[ReqState] = []
        self._check_can_admit(len(req.items))  # refuse before any tokenizing work
        try:
            prompt_ids = await self.offload(self._tokenize_all, req.items)
        except RequestValidationError as exc:  # over a model limit: refused, as by the engine
            raise GenerateError(str(exc), "invalid_request") from None
        try:
            for item, ids in zip(req.items, prompt_ids):
                states.append(await self._send(item, req.stream, ids))
            if req.stream:
                async for chunk in self._stream(states, req.is_batch):
                    yield chunk
            else:
                await self._wait_all(states)
                results = [self._result(s) for s in states]
                yield results if req.is_batch else results[0]
        finally:
            for st in states:
                # An error raised after the scheduler (detokenizing, assembling) leaves it
                # running there: abort it too (the scheduler ignores rids it no longer has).
                if not st.finished or st.error_code == "internal":
                    await self.abort(st.item.rid)
                if not st.finished:  # the caller went away (or one sequence failed)
                    self._report(st, "cancelled")
                self.states.pop(st.item.rid, None)

    async def _wait_all(self, states: list[ReqState]) -> None:
        for st in states:
            while not st.finished:
                st.updated.clear()
                if st.finished:
                    break
                await st.updated.wait()
            self._raise_error(st)

    def _raise_error(self, st: ReqState) -> None:
        """Raise the error ``st`` ended with, if any (EngineDeadError when the engine died)."""
        if st.error is None:
            return
        if self.dead is not None and st.error == self.dead:
            raise EngineDeadError(st.error, in_flight=True)
        raise GenerateError(st.error, st.error_code)

    async def _stream(self, states: list[ReqState], is_batch: bool
                      ) -> AsyncIterator[dict[str, Any]]:
        pending = set(range(len(states)))
        while pending:
            waiters = {asyncio.ensure_future(states[i].updated.wait()): i for i in pending}
            try:
                done, _ = await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            finally:  # also when the caller closes the stream: no waiter is left pending
                for w in waiters:
                    w.cancel()
            for w in done:
                i = waiters[w]
                st = states[i]
                st.updated.clear()
                self._raise_error(st)
                # Read before yielding: while the caller holds this chunk (an SSE write, a
                # slow reader) the final update may land, and it must still go out as a chunk.
                final = st.finished
                chunk = self._result(st, stream_delta=True)
                if is_batch:
                    chunk["index"] = st.item.index
                yield chunk
                if final:
                    pending.discard(i)

    async def generate_once(self, body: dict[str, Any]) -> dict[str, Any] | list[dict]:
        """Non-streaming convenience: the final result."""
        results = [r async for r in self.generate(body)]
        return results[-1]
