"""The server's guard: API key check and request body size limit, as pure ASGI middleware."""

from __future__ import annotations

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
