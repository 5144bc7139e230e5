"""The HTTP server: SGLang's native API and the OpenAI-compatible API over one engine.

FastAPI on uvicorn. The server process is the engine's API process: its event loop runs the
tokenizer manager, and the scheduler and detokenizer are its children. Every route but
``/health`` requires ``Authorization: Bearer <api key>`` when ``--api-key`` is set; bodies over
``--max-request-bytes`` get 413; more than ``--max-queued-requests`` in flight get 503 with
``Retry-After``. A client that disconnects has its requests aborted.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from ...version import __version__
from ..server_args import ServerArgs
from ..wire.launch import EngineProcesses
from .generate_request import RequestValidationError, parse_generate_request
from .metrics import ServerMetrics
from .tokenizer_manager import GenerateError, TokenizerManager

logger = logging.getLogger(__name__)
HEALTH_GENERATE_TIMEOUT_S = 20.0
STATUS = {"invalid_request": 400, "overloaded": 503, "internal": 500}


class ServerState:
    """What the routes share."""

    def __init__(self, args: ServerArgs, procs: EngineProcesses, tokenizer: Any) -> None:
        self.args = args
        self.procs = procs
        self.tokenizer = tokenizer
        self.metrics = ServerMetrics()
        self.tm: TokenizerManager | None = None
        self.started = time.time()

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
    return {400: "invalid_request_error", 401: "authentication_error", 413:
            "invalid_request_error", 503: "server_overloaded"}.get(status, "server_error")


class GuardMiddleware:
    """Pure ASGI (keeps streaming and disconnects intact): API key and body size limit."""

    def __init__(self, app: Any, args: ServerArgs) -> None:
        self.app = app
        self.api_key = args.api_key
        self.max_bytes = args.max_request_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope.get("path", "")
        openai = path.startswith("/v1/")
        headers = {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
        if self.api_key and path != "/health" and not self._authorized(headers):
            resp = error_response("invalid or missing API key (use 'Authorization: Bearer "
                                  "<key>')", 401, "invalid_api_key", openai)
            await resp(scope, receive, send)
            return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            resp = error_response(f"request body of {length} bytes exceeds the limit of "
                                  f"{self.max_bytes}", 413, "body_too_large", openai)
            await resp(scope, receive, send)
            return
        await self.app(scope, self._limited(receive), send)

    def _authorized(self, headers: dict[str, str]) -> bool:
        auth = headers.get("authorization", "")
        return auth == f"Bearer {self.api_key}" or headers.get("x-api-key") == self.api_key

    def _limited(self, receive: Callable) -> Callable:
        seen = 0

        async def wrapped() -> dict:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge(seen)
            return message

        return wrapped


class BodyTooLarge(Exception):
    def __init__(self, seen: int) -> None:
        super().__init__(f"request body exceeds the limit ({seen} bytes read)")


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


def create_app(args: ServerArgs, procs: EngineProcesses, tokenizer: Any) -> FastAPI:
    """The ASGI app over already-started engine processes."""
    state = ServerState(args, procs, tokenizer)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.tm = await TokenizerManager.create(args, procs.endpoints, tokenizer,
                                                 procs.health)
        state.tm.finish_hooks.append(state.metrics.on_finish)
        yield
        await state.tm.close()

    app = FastAPI(title="radixlm", version=__version__, lifespan=lifespan)
    app.state.radixlm = state
    if args.enable_cors:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=["*"], allow_methods=["*"],
                           allow_headers=["*"])
    app.add_middleware(GuardMiddleware, args=args)

    @app.exception_handler(RequestValidationError)
    async def _bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        return error_response(str(exc), 400, openai=request.url.path.startswith("/v1/"))

    @app.exception_handler(GenerateError)
    async def _generate_error(request: Request, exc: GenerateError) -> JSONResponse:
        return error_response(str(exc), STATUS.get(exc.code, 500), exc.code,
                              openai=request.url.path.startswith("/v1/"))

    @app.exception_handler(BodyTooLarge)
    async def _too_large(request: Request, exc: BodyTooLarge) -> JSONResponse:
        return error_response(str(exc), 413, "body_too_large",
                              openai=request.url.path.startswith("/v1/"))

    _native_routes(app, state)
    from .openai_api import add_openai_routes

    add_openai_routes(app, state)
    return app


def _native_routes(app: FastAPI, state: ServerState) -> None:
    args = state.args

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(request: Request) -> Response:
        req = parse_generate_request(await read_json(request))
        if req.stream:
            return sse(state.manager.generate(req),
                       lambda e: {"error": {"message": str(e), "code": e.code}})
        return JSONResponse(await until_disconnect(request, state.manager.generate_once(req)))

    @app.get("/health")
    async def health() -> Response:
        problem = state.procs.health()
        if problem:
            return error_response(problem, 503, "internal")
        return JSONResponse({"status": "ok"})

    @app.get("/health_generate")
    async def health_generate() -> Response:
        body = {"input_ids": [0], "sampling_params": {"max_new_tokens": 1,
                                                      "temperature": 0.0}}
        try:
            await asyncio.wait_for(state.manager.generate_once(body),
                                   HEALTH_GENERATE_TIMEOUT_S)
        except (asyncio.TimeoutError, GenerateError) as exc:
            return error_response(f"generation check failed: {exc}", 503, "internal")
        return JSONResponse({"status": "ok"})

    def model_info() -> dict[str, Any]:
        return {"model_path": args.model_path, "tokenizer_path": args.resolved_tokenizer_path,
                "is_generation": True, "served_model_name": args.model_name,
                "max_context_length": state.procs.info.get("max_context")}

    for path in ("/get_model_info", "/model_info"):
        app.add_api_route(path, model_info, methods=["GET"])

    async def server_info() -> dict[str, Any]:
        info = (await state.manager.control("server_info")).data
        return {**asdict(args), "api_key": None, "version": __version__,
                "internal_states": [info], **info}

    for path in ("/get_server_info", "/server_info"):
        app.add_api_route(path, server_info, methods=["GET"])

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache() -> Response:
        out = await state.manager.control("flush_cache")
        if not out.ok:
            return error_response(f"cache not flushed: {out.error}", 400)
        return PlainTextResponse("Cache flushed.\n")

    @app.post("/abort_request")
    async def abort_request(request: Request) -> Response:
        body = await read_json(request)
        rid = body.get("rid") if isinstance(body, dict) else None
        if not isinstance(rid, str):
            raise RequestValidationError("rid: expected the request id (a string)")
        await state.manager.abort(rid)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def metrics() -> Response:
        state.metrics.update_gauges((await state.manager.control("server_info")).data)
        return Response(state.metrics.render(), media_type="text/plain; version=0.0.4")


def launch_server(args: ServerArgs) -> None:
    """Start the engine processes and serve HTTP until interrupted."""
    import uvicorn
    from transformers import AutoTokenizer

    from ..wire.launch import launch_engine_processes

    args = args.with_local_checkpoint()  # a .gguf converts (once) here
    tokenizer = AutoTokenizer.from_pretrained(args.resolved_tokenizer_path)
    procs = launch_engine_processes(args)
    try:
        app = create_app(args, procs, tokenizer)
        logger.info("serving %s on http://%s:%d", args.model_path, args.host, args.port)
        uvicorn.run(app, host=args.host, port=args.port, log_level="warning",
                    timeout_keep_alive=30)
    finally:
        procs.shutdown()
