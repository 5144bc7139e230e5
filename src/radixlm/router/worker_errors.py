"""Error bodies the HTTP router answers with, each naming the worker involved.

Native routes use ``{"error": {"message", "code", "worker"}}``; ``/v1/`` routes use OpenAI's
error object with the same ``worker`` field added. A worker's own error body is passed on with
``worker`` added (and, for a 5xx, the message prefixed with the worker's URL).
"""

from __future__ import annotations

import json
from typing import Any

from ..runtime.api.http_common import OPENAI_ERROR_TYPES


def error_body(message: str, status: int, code: str, openai: bool,
               worker: str | None = None) -> dict[str, Any]:
    """The JSON error object for one failure."""
    err: dict[str, Any] = {"message": message, "code": code}
    if openai:
        err = {"message": message, "type": OPENAI_ERROR_TYPES.get(status, "server_error"),
               "param": None, "code": code}
    if worker is not None:
        err["worker"] = worker
    return {"error": err}


def annotate(raw: bytes, status: int, worker: str, openai: bool) -> dict[str, Any]:
    """A worker's error response body with ``worker`` named in it."""
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if not (isinstance(body, dict) and isinstance(body.get("error"), dict)):
        text = raw.decode("utf-8", "replace")[:2000]
        return error_body(f"worker {worker} answered {status}: {text}", status,
                          "internal" if status >= 500 else "invalid_request", openai, worker)
    err = dict(body["error"])
    if status >= 500:
        err["message"] = f"worker {worker}: {err.get('message')}"
    err["worker"] = worker
    return {**body, "error": err}


def annotate_event(event: bytes, worker: str) -> bytes:
    """One server-sent event (``data: <json>``): an error chunk gets the worker named."""
    if not event.startswith(b"data: {") or b'"error"' not in event:
        return event
    try:
        chunk = json.loads(event[6:])
    except ValueError:
        return event
    if not (isinstance(chunk, dict) and isinstance(chunk.get("error"), dict)):
        return event
    err = {**chunk["error"], "worker": worker}
    err["message"] = f"worker {worker}: {err.get('message')}"
    return b"data: " + json.dumps({**chunk, "error": err}, ensure_ascii=False).encode()
