"""``radixlm.Engine``: the offline API over the engine's processes, without HTTP.

Same signature as SGLang's ``Engine.generate``: ``prompt`` or ``input_ids`` (single or a list),
a ``sampling_params`` dict (or one per prompt), ``return_logprob``, ``logprob_start_len``,
``top_logprobs_num``, ``stream``. Results are ``{"text", "output_ids", "meta_info"}`` dicts (a
list for a batch or ``n > 1``), or an iterator of cumulative chunks when streaming. The
tokenizer manager runs on a private event-loop thread, so ``generate`` is safe to call from
many threads at once.

Once the engine's processes die (or after :meth:`Engine.shutdown`), every call raises
:class:`EngineDeadError` saying which process died and how; calls in flight get it too.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

from ..light_tokenizer import load_hf_tokenizer
from ..load_memory import release_freed_heap
from ..server_args import ServerArgs
from ..wire.launch import EngineProcesses, launch_engine_processes
from .request_limits import RequestLimits
from .tokenizer_manager import EngineDeadError, GenerateError, TokenizerManager

# How often a caller blocked on the engine wakes to run pending signal handlers. Linux may
# deliver a process's SIGINT to any of its threads (the event loop's, a pool worker's); the
# main thread, asleep in a lock acquire with no timeout, then runs Python's handler (Ctrl-C's
# KeyboardInterrupt) only when its call returns, and a call can be long. A bounded wait
# returns to the interpreter, which runs the handler: Ctrl-C lands within this delay.
SIGNAL_POLL_S = 0.1


def wait_interruptibly(future: concurrent.futures.Future, timeout: float | None) -> Any:
    """``future.result(timeout)``, waking every :data:`SIGNAL_POLL_S` so that pending signal
    handlers run in the waiting thread (see there)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        step = SIGNAL_POLL_S if deadline is None else max(
            0.0, min(SIGNAL_POLL_S, deadline - time.monotonic()))
        try:
            return future.result(step)
        except concurrent.futures.TimeoutError:
            # the call's own TimeoutError, or the caller's deadline: as result() raises them
            if future.done() or (deadline is not None and time.monotonic() >= deadline):
                raise


class Engine:
    """Start with ``Engine(model_path=..., **server_args)``; stop with :meth:`shutdown` or
    use as a context manager."""

    def __init__(self, model_path: str | None = None, *, server_args: ServerArgs | None = None,
                 **kwargs: Any) -> None:
        if server_args is None:
            if model_path is None:
                raise TypeError("Engine needs model_path (or server_args)")
            server_args = ServerArgs.from_kwargs(model_path=str(model_path), **kwargs)
        elif kwargs or model_path:
            raise TypeError("pass either server_args or keyword arguments, not both")
        if server_args.dp_size > 1:
            raise ValueError("Engine is one replica: for dp_size > 1 use "
                             "radixlm.router.dp_engine.DataParallelEngine (or `radixlm serve "
                             "--dp-size N`)")
        server_args = server_args.with_local_checkpoint()  # a .gguf: config/tokenizer folder
        self.server_args = server_args
        # AutoTokenizer's tokenizer, without importing transformers (and torch) where the
        # folder is a plain tokenizer.json (light_tokenizer.py)
        self.tokenizer = load_hf_tokenizer(server_args.resolved_tokenizer_path)
        # the parse's freed heap back to the system before the children start (the user
        # process' peak RSS, issue 40); the tokenizer itself is untouched
        release_freed_heap()
        self._procs: EngineProcesses | None = launch_engine_processes(server_args)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True,
                                        name="radixlm-engine-loop")
        self._thread.start()
        self.tokenizer_manager: TokenizerManager = self._call(TokenizerManager.create(
            server_args, self._procs.endpoints, self.tokenizer, self._procs.health,
            RequestLimits.from_engine(server_args, self._procs.info)))
        atexit.register(self.shutdown)

    @property
    def info(self) -> dict[str, Any]:
        assert self._procs is not None
        return dict(self._procs.info)

    def _call(self, coro: Any, timeout: float | None = None) -> Any:
        if self._procs is None:  # the loop is stopped: a submitted call would never return
            coro.close()
            raise EngineDeadError("the engine has been shut down; create a new Engine")
        return wait_interruptibly(asyncio.run_coroutine_threadsafe(coro, self._loop), timeout)

    @staticmethod
    def _body(prompt: Any, input_ids: Any, sampling_params: Any, **fields: Any
              ) -> dict[str, Any]:
        body = {"text": prompt, "input_ids": input_ids, "sampling_params": sampling_params}
        body.update({k: v for k, v in fields.items() if v is not None})
        return {k: v for k, v in body.items() if v is not None}

    def generate(
        self,
        prompt: str | list[str] | None = None,
        sampling_params: dict[str, Any] | list[dict[str, Any]] | None = None,
        input_ids: list[int] | list[list[int]] | None = None,
        return_logprob: bool | list[bool] = False,
        logprob_start_len: int | list[int] | None = None,
        top_logprobs_num: int | list[int] | None = None,
        stream: bool = False,
        rid: str | list[str] | None = None,
        return_text_in_logprobs: bool = False,
        cache_salt: str | None = None,
        **unsupported: Any,
    ) -> dict[str, Any] | list[dict[str, Any]] | Iterator[dict[str, Any]]:
        """Generate for one prompt or a batch; see the module docstring."""
        body = self._body(prompt, input_ids, sampling_params, return_logprob=return_logprob,
                          logprob_start_len=logprob_start_len,
                          top_logprobs_num=top_logprobs_num, stream=stream, rid=rid,
                          return_text_in_logprobs=return_text_in_logprobs,
                          cache_salt=cache_salt, **unsupported)
        if stream:
            return self._stream_sync(body)
        return self._call(self.tokenizer_manager.generate_once(body))

    def _stream_sync(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        agen = self.tokenizer_manager.generate(body)
        try:
            while True:
                try:
                    yield self._call(agen.__anext__())
                except StopAsyncIteration:
                    return
        finally:
            self._call(agen.aclose())

    async def async_generate(
        self,
        prompt: str | list[str] | None = None,
        sampling_params: dict[str, Any] | list[dict[str, Any]] | None = None,
        input_ids: list[int] | list[list[int]] | None = None,
        return_logprob: bool | list[bool] = False,
        logprob_start_len: int | list[int] | None = None,
        top_logprobs_num: int | list[int] | None = None,
        stream: bool = False,
        rid: str | list[str] | None = None,
        return_text_in_logprobs: bool = False,
        cache_salt: str | None = None,
        **unsupported: Any,
    ) -> dict[str, Any] | list[dict[str, Any]] | AsyncIterator[dict[str, Any]]:
        """Awaitable :meth:`generate`; with ``stream=True`` returns an async iterator."""
        body = self._body(prompt, input_ids, sampling_params, return_logprob=return_logprob,
                          logprob_start_len=logprob_start_len,
                          top_logprobs_num=top_logprobs_num, stream=stream, rid=rid,
                          return_text_in_logprobs=return_text_in_logprobs,
                          cache_salt=cache_salt, **unsupported)
        if stream:
            return self._stream_async(body)
        fut = asyncio.run_coroutine_threadsafe(
            self.tokenizer_manager.generate_once(body), self._loop)
        return await asyncio.wrap_future(fut)

    async def _stream_async(self, body: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        agen = self.tokenizer_manager.generate(body)
        try:
            while True:
                fut = asyncio.run_coroutine_threadsafe(agen.__anext__(), self._loop)
                try:
                    yield await asyncio.wrap_future(fut)
                except StopAsyncIteration:
                    return
        finally:
            await asyncio.wrap_future(
                asyncio.run_coroutine_threadsafe(agen.aclose(), self._loop))

    def flush_cache(self) -> bool:
        """Drop the prefix cache; False (nothing done) while requests are in flight."""
        return self._call(self.tokenizer_manager.control("flush_cache")).ok

    def get_server_info(self) -> dict[str, Any]:
        out = self._call(self.tokenizer_manager.control("server_info"))
        return {**out.data, "server_args": vars(self.server_args)}

    def abort_request(self, rid: str) -> None:
        self._call(self.tokenizer_manager.abort(rid))

    def audit(self, repair: bool = False) -> list[str]:
        """Check the KV ownership invariant in the scheduler (problems found, if any)."""
        return self._call(self.tokenizer_manager.control("audit", repair=repair)).data[
            "problems"]

    def shutdown(self) -> None:
        """Stop the processes and the loop thread (idempotent)."""
        if self._procs is None:
            return
        try:
            self._call(self.tokenizer_manager.close(), timeout=5)
        except Exception:  # noqa: BLE001 - shutting down regardless
            pass
        self._procs.shutdown()
        self._procs = None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


__all__ = ["Engine", "EngineDeadError", "GenerateError"]
