"""``radixlm router --worker-urls URL [URL ...]``: one HTTP API over running ``radixlm serve``
instances (as sgl-router), routing each request by the policy of ``--policy``.

Routes: ``/generate`` (streaming or not), ``/v1/completions``, ``/v1/chat/completions`` are
routed (see ``proxy``); ``/v1/models``, ``/get_model_info`` and ``/health_generate`` go to a
live worker; ``/get_server_info`` and ``/metrics`` aggregate every worker with the router's
view (each worker alive or not and why, in flight, routed); ``/flush_cache`` goes to all;
``/abort_request`` goes to the worker holding the rid (to all live ones for a rid the router
does not know). ``/health`` is ok while at least one worker is in rotation.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response

from .. import env
from ..dataclass_cli import build_or_exit
from ..runtime.api.http_common import ClientDisconnected, disconnected_response
from ..version import __version__
from .metrics_merge import merge_metrics
from .proxy import FORWARDED_HEADERS, WORKER_HEADER, proxy_generation
from .router_args import RouterArgs
from .router_state import WORKER_ERRORS, RouterState, describe, logger
from .worker_errors import annotate, error_body

ROUTED = ("/generate", "/v1/completions", "/v1/chat/completions")


def create_router_app(args: RouterArgs) -> FastAPI:
    """The router's ASGI app; its workers are checked when it starts."""
    state = RouterState(args)

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await state.start()
        logger.info("routing over %s by %s; live: %s", list(args.worker_urls), args.policy,
                    state.pool.live())
        yield
        await state.close()

    app = FastAPI(title="radixlm router", version=__version__, lifespan=lifespan)
    app.state.router = state

    @app.exception_handler(ClientDisconnected)
    async def _gone(request: Request, exc: ClientDisconnected) -> Response:
        return disconnected_response()

    for path in ROUTED:
        methods = ["POST", "PUT"] if path == "/generate" else ["POST"]
        app.add_api_route(path, _routed(state, path), methods=methods)
    for path in ("/v1/models", "/get_model_info", "/model_info", "/health_generate"):
        app.add_api_route(path, _to_one(state, path), methods=["GET"])
    _aggregate_routes(app, state)
    return app


def _auth(request: Request) -> dict[str, str]:
    """The client's headers the workers need (its API key)."""
    return {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS}


def _routed(state: RouterState, path: str) -> Any:
    async def route(request: Request) -> Response:
        return await proxy_generation(state, request, path)
    return route


def _no_worker(state: RouterState, openai: bool) -> JSONResponse:
    why = "; ".join(f"{s['url']}: {s['error']}" for s in state.pool.status())
    return JSONResponse(error_body(f"no live worker ({why})", 503, "no_worker", openai), 503,
                        headers={"Retry-After": "1"})


def _to_one(state: RouterState, path: str) -> Any:
    """A GET answered by one live worker (the least loaded)."""
    async def route(request: Request) -> Response:
        for url in sorted(state.pool.live(), key=lambda u: state.pool.workers[u].in_flight):
            try:
                status, raw = await state.get(url, path, _auth(request))
            except WORKER_ERRORS as exc:
                state.mark_dead(url, f"unreachable: {describe(exc)}")
                continue
            if status >= 400:
                return JSONResponse(annotate(raw, status, url, path.startswith("/v1/")),
                                    status, headers={WORKER_HEADER: url})
            return Response(raw, status, media_type="application/json",
                            headers={WORKER_HEADER: url})
        return _no_worker(state, path.startswith("/v1/"))
    return route


def _aggregate_routes(app: FastAPI, state: RouterState) -> None:
    pool = state.pool

    @app.get("/health")
    async def health() -> Response:
        if not pool.live():
            return _no_worker(state, False)
        return JSONResponse({"status": "ok", "live_workers": pool.live()})

    async def server_info(request: Request) -> dict[str, Any]:
        got = await state.gather_get("/get_server_info", _auth(request))
        workers = []
        for status in pool.status():
            out = got.get(str(status["url"]))
            info = json.loads(out[1]) if isinstance(out, tuple) and out[0] == 200 else None
            problem = out if isinstance(out, str) else None
            workers.append({**status, "server_info": info, "info_error": problem})
        return {"version": __version__, "router": {**asdict(state.args)},
                "policy": state.args.policy, "max_spread": pool.max_spread,
                "workers": workers,
                "internal_states": [s for w in workers if w["server_info"]
                                    for s in w["server_info"].get("internal_states", [])]}

    for path in ("/get_server_info", "/server_info"):
        app.add_api_route(path, server_info, methods=["GET"])

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache(request: Request) -> Response:
        urls = pool.live()
        outs = await asyncio.gather(*(state.post_json(u, "/flush_cache", None, _auth(request))
                                      for u in urls), return_exceptions=True)
        failed = {u: (repr(o) if isinstance(o, BaseException) else o[1].decode()[:300])
                  for u, o in zip(urls, outs)
                  if isinstance(o, BaseException) or o[0] != 200}
        if failed or not urls:
            return JSONResponse(error_body(f"cache not flushed on {failed or 'any worker'}",
                                           400, "invalid_request", False), 400)
        return PlainTextResponse("Cache flushed.\n")

    @app.post("/abort_request")
    async def abort_request(request: Request) -> Response:
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        rid = body.get("rid") if isinstance(body, dict) else None
        if not isinstance(rid, str):
            return JSONResponse(error_body("rid: expected the request id (a string)", 400,
                                           "invalid_request", False), 400)
        holder = pool.holder(rid)
        targets = [holder] if holder else pool.live()
        await asyncio.gather(*(state.post_json(u, "/abort_request", {"rid": rid},
                                               _auth(request))
                               for u in targets), return_exceptions=True)
        return JSONResponse({"status": "ok", "workers": targets})

    @app.get("/metrics")
    async def metrics(request: Request) -> Response:
        got = await state.gather_get("/metrics", _auth(request))
        texts = {u: o[1].decode() for u, o in got.items() if isinstance(o, tuple)}
        rows = pool.status()

        def samples(field: str) -> list[str]:
            return [f'{{worker="{r["url"]}"}} {int(r[field])}' for r in rows]
        own = [("radixlm_router_worker_up", "gauge", "1 while the worker is in rotation",
                [f"radixlm_router_worker_up{s}" for s in samples("alive")]),
               ("radixlm_router_in_flight", "gauge", "Requests in flight per worker",
                [f"radixlm_router_in_flight{s}" for s in samples("in_flight")]),
               ("radixlm_router_routed_requests", "counter", "Requests routed per worker",
                [f"radixlm_router_routed_requests_total{s}" for s in samples("routed")])]
        return Response(merge_metrics(texts, own), media_type="text/plain; version=0.0.4")


def launch_router(args: RouterArgs) -> int:
    """Serve the router until interrupted; returns the exit code."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(create_router_app(args), host=args.host,
                                           port=args.port, log_level="warning",
                                           timeout_keep_alive=30))
    logger.info("router on http://%s:%d", args.host, args.port)
    server.run()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``radixlm router ...``: parse the flags (sgl-router's names) and serve."""
    parser = argparse.ArgumentParser(prog="radixlm router", description=(
        "One HTTP API over running `radixlm serve` instances, routed by --policy "
        "(sgl-router's flag names)."))
    RouterArgs.add_cli_args(parser)
    ns = parser.parse_args(argv)
    logging.basicConfig(level=env.log_level(), format="%(asctime)s %(name)s %(message)s")
    return launch_router(build_or_exit(parser, RouterArgs.from_cli_args, ns))


if __name__ == "__main__":
    sys.exit(main())
