"""The HTTP server: SGLang's native API and the OpenAI-compatible API over one engine.

FastAPI on uvicorn. The server process is the engine's API process: its event loop runs the
tokenizer manager, and the scheduler and detokenizer are its children. Every route but
``/health`` requires ``Authorization: Bearer <api key>`` when ``--api-key`` is set; bodies over
``--max-request-bytes`` get 413; more than ``--max-queued-requests`` in flight get 503 with
``Retry-After``. A client that disconnects has its requests aborted.

A dead engine is never served: when a child process dies or the scheduler crashes,
``/health`` fails at once, in-flight requests get the error, and :func:`launch_server` stops
serving within :data:`SHUTDOWN_GRACE_S` and returns :data:`ENGINE_DIED_EXIT_CODE` (the
process exits with it, so a supervisor restarts it).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from ...version import __version__
from ..server_args import ServerArgs
from ..wire.launch import EngineProcesses
from .generate_request import RequestValidationError, parse_generate_request
from .http_common import (
    GENERATE_ERROR_STATUS,
    ClientDisconnected,
    ServerState,
    disconnected_response,
    error_response,
    read_json,
    sse,
    until_disconnect,
)
from .http_guard import BodyTooLarge, GuardMiddleware
from .openai_api import add_openai_routes
from .openapi_docs import install_openapi
from .request_limits import RequestLimits
from .tokenizer_manager import EngineDeadError, GenerateError, TokenizerManager

logger = logging.getLogger(__name__)
HEALTH_GENERATE_TIMEOUT_S = 20.0
ENGINE_DIED_EXIT_CODE = 1
SHUTDOWN_GRACE_S = 2  # for in-flight responses (already failed) to be written on a death


def create_app(args: ServerArgs, procs: EngineProcesses, tokenizer: Any) -> FastAPI:
    """The ASGI app over already-started engine processes."""
    state = ServerState(args, procs, tokenizer)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        state.tm = await TokenizerManager.create(args, procs.endpoints, tokenizer,
                                                 procs.health,
                                                 RequestLimits.from_engine(args, procs.info))
        state.tm.finish_hooks.append(state.metrics.on_finish)
        state.tm.on_dead.append(state.on_engine_dead)
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
        # A request refused because the engine is dead: unavailable (503), not its fault; one
        # that was running when the engine died fails with the crash (500).
        refused = isinstance(exc, EngineDeadError) and not exc.in_flight
        status = 503 if refused else GENERATE_ERROR_STATUS.get(exc.code, 500)
        return error_response(str(exc), status, exc.code,
                              openai=request.url.path.startswith("/v1/"))

    @app.exception_handler(ClientDisconnected)
    async def _gone(request: Request, exc: ClientDisconnected) -> Response:
        return disconnected_response()  # expected, so no traceback

    @app.exception_handler(BodyTooLarge)
    async def _too_large(request: Request, exc: BodyTooLarge) -> JSONResponse:
        return error_response(str(exc), 413, "body_too_large",
                              openai=request.url.path.startswith("/v1/"))

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return error_response(_route_error(request, exc), exc.status_code,
                              "not_found" if exc.status_code == 404 else "invalid_request",
                              openai=request.url.path.startswith("/v1/"))

    _native_routes(app, state)

    add_openai_routes(app, state)
    install_openapi(app)
    return app


# Routes SGLang's frontend may call that radixlm deliberately does not serve, and why.
NOT_SERVED = {
    "/concate_and_append_request":
        "parallel encoding (fork join mode 'concate_and_append', which splices the branches' "
        "KV caches) is not supported by radixlm (SGLang's own server no longer serves it "
        "either); join with mode='gather_variable', or set "
        "global_config.enable_parallel_encoding = False to concatenate the text instead",
}


def _route_error(request: Request, exc: StarletteHTTPException) -> str:
    path = request.url.path
    if path in NOT_SERVED:
        return f"{path}: {NOT_SERVED[path]}"
    if exc.status_code == 404:
        return f"no route {request.method} {path} on this server (routes are listed at /docs)"
    if exc.status_code == 405:
        return f"{path} does not accept {request.method}"
    return f"{path}: {exc.detail}"


def _native_routes(app: FastAPI, state: ServerState) -> None:
    args = state.args

    @app.api_route("/generate", methods=["POST", "PUT"])
    async def generate(request: Request) -> Response:
        req = parse_generate_request(await read_json(request))
        if req.stream:
            return await sse(request, state.manager.generate(req),
                             lambda e: {"error": {"message": str(e), "code": e.code}})
        return JSONResponse(await until_disconnect(request, state.manager.generate_once(req)))

    @app.get("/health")
    async def health() -> Response:
        problem = state.problem()
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
                "internal_states": [info], **info,
                "process_ids": {name: p.pid for name, p in state.procs.procs.items()}}

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


def launch_server(args: ServerArgs) -> int:
    """Start the engine processes and serve HTTP until interrupted (exit code 0) or until
    the engine dies (:data:`ENGINE_DIED_EXIT_CODE`); returns the process exit code."""
    import uvicorn

    from ..load_memory import load_server_tokenizer
    from ..wire.launch import launch_engine_processes

    args = args.with_local_checkpoint()  # a .gguf: its config/tokenizer folder (made once)
    tokenizer = load_server_tokenizer(args.resolved_tokenizer_path)  # this process is the server's
    procs = launch_engine_processes(args)
    try:
        app = create_app(args, procs, tokenizer)
        server = uvicorn.Server(uvicorn.Config(
            app, host=args.host, port=args.port, log_level="warning", timeout_keep_alive=30,
            timeout_graceful_shutdown=SHUTDOWN_GRACE_S))
        state: ServerState = app.state.radixlm
        state.stop_server = lambda: setattr(server, "should_exit", True)
        logger.info("serving %s on http://%s:%d", args.model_path, args.host, args.port)
        server.run()
        if state.engine_dead is not None:
            procs.wait_for_a_death(SHUTDOWN_GRACE_S)
            logger.error("the engine died (%s): %s; the HTTP server exits with code %d",
                         state.engine_dead, procs.describe(), ENGINE_DIED_EXIT_CODE)
            return ENGINE_DIED_EXIT_CODE
        return 0
    finally:
        procs.shutdown()
