"""The server's guard: API key check and request body size limit, as pure ASGI middleware."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from typing import Any

from ..server_args import ServerArgs
from .http_common import error_response


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
        # ASGI header bytes are latin-1: every byte string decodes, and encodes back exactly
        headers = {k.decode("latin-1").lower(): v.decode("latin-1")
                   for k, v in scope.get("headers", [])}
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
        # The auth scheme is case-insensitive (RFC 7235); keys compare in constant time so
        # response timing does not reveal how much of a guessed key was right.
        scheme, _, token = headers.get("authorization", "").strip().partition(" ")
        presented = [token.strip()] if scheme.lower() == "bearer" else []
        presented += [headers["x-api-key"]] if "x-api-key" in headers else []
        want = self.api_key.encode("utf-8")
        return any(hmac.compare_digest(p.encode("latin-1"), want)
                   for p in presented)

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
