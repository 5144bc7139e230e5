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
from fastapi.responses import JSONResponse, StreamingResponse

from ..server_args import ServerArgs
from ..wire.launch import EngineProcesses
from .generate_request import RequestValidationError
from .metrics import ServerMetrics
from .tokenizer_manager import GenerateError, TokenizerManager


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
    return {400: "invalid_request_error", 401: "authentication_error",
            404: "invalid_request_error", 405: "invalid_request_error", 413:
            "invalid_request_error", 503: "server_overloaded"}.get(status, "server_error")


async def read_json(request: Request) -> Any:
    """The parsed JSON body, or raise RequestValidationError naming the problem."""
    raw = await request.body()
    try:
        return json.loads(raw or b"{}")
    except json.JSONDecodeError as exc:
        raise RequestValidationError(f"body is not valid JSON: {exc}") from None


async def until_disconnect(request: Request, work: Awaitable[Any]) -> Any:
    """Await ``work``, cancelling it (which aborts its requests) if the client goes away."""
    task = asyncio.ensure_future(work)
    while not task.done():
        done, _ = await asyncio.wait({task}, timeout=0.5)
        if not done and await request.is_disconnected():
            task.cancel()
            raise asyncio.CancelledError("client disconnected")
    return task.result()


def sse(chunks: AsyncIterator[Any], on_error: Callable[[GenerateError], Any]
        ) -> StreamingResponse:
    """Server-sent events: ``data: <json>`` per chunk, then ``data: [DONE]``."""

    async def body() -> AsyncIterator[str]:
        try:
            async for chunk in chunks:
                yield f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"
        except GenerateError as exc:
            yield f"data: {json.dumps(on_error(exc))}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(body(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})
