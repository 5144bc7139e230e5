"""What the HTTP routes share: the server state, error bodies, JSON bodies, disconnects, SSE.

Both route modules (``http_server`` for SGLang's native API, ``openai_api`` for the OpenAI API)
import from here, so neither imports the other.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..server_args import ServerArgs
from ..wire.launch import EngineProcesses
from .json_body import parse_json_body
from .metrics import ServerMetrics
from .tokenizer_manager import GenerateError, TokenizerManager

INLINE_PARSE_BYTES = 64 * 1024  # smaller bodies parse on the loop (a thread hop costs more)
DISCONNECT_POLL_S = 0.5


class ServerState:
    """What the routes share."""

    def __init__(self, args: ServerArgs, procs: EngineProcesses, tokenizer: Any) -> None:
        self.args = args
        self.procs = procs
        self.tokenizer = tokenizer
        self.metrics = ServerMetrics()
        self.tm: TokenizerManager | None = None
        self.started = time.time()
        self.engine_dead: str | None = None  # why, once the engine died (the server exits)
        self.stop_server: Callable[[], None] | None = None  # set by whoever runs the server

    def problem(self) -> str | None:
        """Why the server cannot serve (a dead engine), or None while it is healthy."""
        if self.engine_dead is not None:
            return self.engine_dead
        if self.tm is not None and self.tm.dead is not None:
            return self.tm.dead
        return self.procs.health()

    def on_engine_dead(self, reason: str) -> None:
        """A supervisor can only restart what exits: stop serving (the process then exits
        non-zero) once in-flight requests have had their error."""
        self.engine_dead = reason
        if self.stop_server is not None:
            self.stop_server()

    @property
    def manager(self) -> TokenizerManager:
        assert self.tm is not None, "tokenizer manager not started"
        return self.tm


def error_response(message: str, status: int = 400, code: str = "invalid_request",
                   openai: bool = False, param: str | None = None) -> JSONResponse:
    """Native routes: ``{"error": {"message", "code"}}``; OpenAI routes: OpenAI's shape."""
    if openai:
        err = {"message": message, "type": _openai_type(status), "param": param,
               "code": code}
    else:
        err = {"message": message, "code": code}
    headers = {"Retry-After": "1"} if status == 503 else None
    return JSONResponse({"error": err}, status_code=status, headers=headers)


def _openai_type(status: int) -> str:
    return OPENAI_ERROR_TYPES.get(status, "server_error")


OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                      404: "invalid_request_error", 405: "invalid_request_error",
                      413: "invalid_request_error",
                      503: "server_overloaded"}
GENERATE_ERROR_STATUS = {"invalid_request": 400, "overloaded": 503, "internal": 500}


def openai_error_body(exc: GenerateError) -> dict[str, Any]:
    """OpenAI's error object for a failure inside a stream (after its first byte)."""
    status = GENERATE_ERROR_STATUS.get(exc.code, 500)
    return {"error": {"message": str(exc), "type": _openai_type(status), "param": None,
                      "code": exc.code}}


async def read_json(request: Request) -> Any:
    """The parsed JSON body (strict: see ``json_body``), or raise RequestValidationError
    naming the problem. Large bodies parse on a thread, off the event loop."""
    raw = await request.body()
    if len(raw) < INLINE_PARSE_BYTES:
        return parse_json_body(raw)
    return await asyncio.to_thread(parse_json_body, raw)


class ClientDisconnected(Exception):
    """The client went away before its response; its requests were aborted."""


async def until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``; if the client goes away, cancel it (which aborts its requests), wait
    for that to finish, and raise :class:`ClientDisconnected`."""
    task = asyncio.ensure_future(work)
    try:
        while not task.done():
            done, _ = await asyncio.wait({task}, timeout=DISCONNECT_POLL_S)
            if not done and await request.is_disconnected():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
                raise ClientDisconnected()
    except asyncio.CancelledError:  # the server itself cancelled this handler
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise
    return task.result()


def disconnected_response() -> Response:
    """What a handler 'answers' a client that is gone (never delivered; logged as 499)."""
    return Response(status_code=499)


async def sse(request: Request, chunks: AsyncIterator[Any],
              on_error: Callable[[GenerateError], Any]) -> StreamingResponse:
    """Server-sent events: ``data: <json>`` per chunk, then ``data: [DONE]``.

    The first chunk is awaited before the response starts, so an error known before the
    first byte (overload, validation, a dead engine, a refused admission) raises here and
    becomes the HTTP status, for streams as for other requests."""
    try:
        first = await until_disconnect(request, _first(chunks))
    except BaseException:
        await chunks.aclose()
        raise

    async def body() -> AsyncIterator[str]:
        try:
            if first is not _END:
                yield f"data: {json.dumps(first, ensure_ascii=False)}\n\n"
                async for chunk in chunks:
                    yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        except GenerateError as exc:
            yield f"data: {json.dumps(on_error(exc))}\n\n"
        finally:
            await chunks.aclose()
        yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


_END = object()


async def _first(chunks: AsyncIterator[Any]) -> Any:
    async for chunk in chunks:
        return chunk
    return _END
