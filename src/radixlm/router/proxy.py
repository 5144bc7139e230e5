"""Forwarding one generation request (``/generate``, ``/v1/completions``,
``/v1/chat/completions``) to the worker the policy picks, streaming or not.

Invariants: the request counts as in flight on its worker from the routing decision until its
response (or stream) ends, however it ends; a worker that cannot be reached before the request
was sent leaves the rotation and the request is routed to another one; any other failure
reaches the client as a 5xx (or, inside a stream, an error event then ``[DONE]``) whose JSON
names the worker, and makes the router re-check that worker's health at once.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from fastapi import Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from ..runtime.api.http_common import until_disconnect
from .policy import NoReplicaError
from .router_state import WORKER_ERRORS, RouterState, describe
from .routing_key import routing_key
from .worker_errors import annotate, annotate_event, error_body

FORWARDED_HEADERS = ("authorization", "content-type")
WORKER_HEADER = "x-radixlm-worker"  # names the worker that served a response


def assign_rids(body: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``body`` with a rid per prompt (kept if the client gave them), and the rids, so an
    abort by rid can be sent to the worker that holds the request."""
    rid = body.get("rid")
    if rid is None:
        prompts = body.get("input_ids") if body.get("input_ids") is not None else body.get(
            "text")
        batch = isinstance(prompts, list) and bool(prompts) and not isinstance(prompts[0], int)
        rid = [uuid.uuid4().hex for _ in prompts] if batch else uuid.uuid4().hex
        body = {**body, "rid": rid}
    rids = [rid] if isinstance(rid, str) else [r for r in rid if isinstance(r, str)] \
        if isinstance(rid, list) else []
    return body, rids


async def proxy_generation(state: RouterState, request: Request, path: str) -> Response:
    """Route and forward one generation request; see the module docstring."""
    openai = path.startswith("/v1/")
    raw = await request.body()
    if len(raw) > state.args.max_payload_size:
        return JSONResponse(error_body(f"request body of {len(raw)} bytes is over the "
                                       f"router's --max-payload-size "
                                       f"({state.args.max_payload_size})", 413,
                                       "body_too_large", openai), status_code=413)
    try:
        body = json.loads(raw)
    except ValueError:
        body = None  # forwarded as is: the worker names what is wrong with it
    rids: list[str] = []
    if path == "/generate" and isinstance(body, dict):
        body, rids = assign_rids(body)
        raw = json.dumps(body, ensure_ascii=False).encode()
    key = routing_key(path, body)
    stream = isinstance(body, dict) and body.get("stream") is True
    headers = {k: v for k, v in request.headers.items() if k.lower() in FORWARDED_HEADERS}
    sent = await until_disconnect(request, _send(state, request.method, path, raw, headers,
                                                 key, rids, openai))
    if isinstance(sent, Response):
        return sent
    url, resp = sent
    if not stream or resp.status != 200:
        try:
            return await until_disconnect(request, _whole(state, url, resp, rids, openai))
        finally:
            resp.release()
            state.pool.release(url, rids)
    return StreamingResponse(_events(state, url, resp, rids, openai),
                             media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", WORKER_HEADER: url})


async def _send(state: RouterState, method: str, path: str, raw: bytes,
                headers: dict[str, str], key: list[int], rids: list[str], openai: bool
                ) -> tuple[str, aiohttp.ClientResponse] | Response:
    """The chosen worker and its response (headers read), or the router's error response."""
    while True:
        try:
            url = state.pool.acquire(key, rids)
        except NoReplicaError as exc:
            return JSONResponse(error_body(str(exc), 503, "no_worker", openai), 503,
                                headers={"Retry-After": "1"})
        try:
            return url, await state.session.request(method, url + path, data=raw,
                                                    headers=headers)
        except aiohttp.ClientConnectorError as exc:  # never reached it: try another worker
            state.pool.release(url, rids)
            state.mark_dead(url, f"unreachable: {describe(exc)}")
        except asyncio.CancelledError:
            state.pool.release(url, rids)
            raise
        except WORKER_ERRORS as exc:
            state.pool.release(url, rids)
            state.check_soon(url)
            return _failed(url, exc, openai)


def _failed(url: str, exc: BaseException, openai: bool) -> JSONResponse:
    return JSONResponse(error_body(f"worker {url} failed: {describe(exc)}", 502, "worker_failed",
                                   openai, url), 502, headers={WORKER_HEADER: url})


async def _whole(state: RouterState, url: str, resp: aiohttp.ClientResponse,
                 rids: list[str], openai: bool) -> Response:
    try:
        raw = await resp.read()
    except WORKER_ERRORS as exc:
        state.check_soon(url)
        return _failed(url, exc, openai)
    headers = {WORKER_HEADER: url}
    if resp.status < 400:
        return Response(raw, resp.status, headers=headers,
                        media_type=resp.headers.get("content-type", "application/json"))
    if resp.status >= 500:
        state.check_soon(url)
    if resp.status == 503 and "Retry-After" in resp.headers:
        headers["Retry-After"] = resp.headers["Retry-After"]
    return JSONResponse(annotate(raw, resp.status, url, openai), resp.status, headers=headers)


async def _events(state: RouterState, url: str, resp: aiohttp.ClientResponse,
                  rids: list[str], openai: bool) -> AsyncIterator[bytes]:
    """The worker's server-sent events, error events annotated; if the worker's stream breaks
    off, an error event naming it, then ``[DONE]``."""
    buf, done = b"", False
    try:
        async for piece in resp.content.iter_any():
            buf += piece
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                done = done or event == b"data: [DONE]"
                if b'"error"' in event:
                    state.check_soon(url)
                yield annotate_event(event, url) + b"\n\n"
        if not done:
            raise aiohttp.ClientPayloadError("the stream ended before [DONE]")
    except WORKER_ERRORS as exc:
        state.check_soon(url)
        err = error_body(f"worker {url} failed mid-stream: {describe(exc)}", 502, "worker_failed",
                         openai, url)
        yield f"data: {json.dumps(err)}\n\ndata: [DONE]\n\n".encode()
    finally:
        resp.close()
        state.pool.release(url, rids)
