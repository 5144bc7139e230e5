"""``RouterState``: the HTTP router's workers (a :class:`WorkerPool`) and its client session.

It does the router's I/O to workers: health checks (a worker whose ``/health`` fails leaves
the rotation and is logged; one that answers again rejoins), and small JSON/text GETs and
POSTs used by the aggregating routes. Forwarding generation requests lives in ``proxy``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp

from .policy import make_policy
from .router_args import RouterArgs
from .worker_pool import WorkerPool

logger = logging.getLogger("radixlm.router")
WORKER_ERRORS = (aiohttp.ClientError, asyncio.TimeoutError, ValueError)


class RouterState:
    """What the router's routes share; :meth:`start` inside the event loop."""

    def __init__(self, args: RouterArgs) -> None:
        self.args = args
        self.pool = WorkerPool(args.worker_urls, make_policy(
            args.policy, cache_threshold=args.cache_threshold,
            balance_abs_threshold=args.balance_abs_threshold,
            balance_rel_threshold=args.balance_rel_threshold,
            max_tree_entries=args.max_tree_size))
        self._session: aiohttp.ClientSession | None = None
        self._health_task: asyncio.Task | None = None
        self._checks: set[asyncio.Task] = set()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "router not started"
        return self._session

    async def start(self) -> None:
        # limit=0: one connection per in-flight request, however many (streams are long)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0),
            timeout=aiohttp.ClientTimeout(total=self.args.request_timeout_secs))
        await self.check_all()
        self._health_task = asyncio.create_task(self._health_loop())

    async def close(self) -> None:
        if self._health_task is not None:
            self._health_task.cancel()
            await asyncio.gather(self._health_task, *self._checks, return_exceptions=True)
        if self._session is not None:
            await self._session.close()

    async def _health_loop(self) -> None:
        while True:
            await asyncio.sleep(self.args.health_check_interval_secs)
            await self.check_all()

    async def check_all(self) -> None:
        await asyncio.gather(*(self.check(u) for u in self.pool.workers))

    def check_soon(self, url: str) -> None:
        """Check ``url``'s health now, in the background (after it failed a request)."""
        task = asyncio.create_task(self.check(url))
        self._checks.add(task)
        task.add_done_callback(self._checks.discard)

    async def check(self, url: str) -> None:
        """Poll ``url``'s ``/health``; take it out of (or back into) the rotation."""
        timeout = aiohttp.ClientTimeout(total=self.args.health_check_timeout_secs)
        try:
            async with self.session.get(url + "/health", timeout=timeout) as resp:
                ok, detail = resp.status == 200, _message(await resp.read(), resp.status)
        except WORKER_ERRORS as exc:
            ok, detail = False, f"unreachable: {describe(exc)}"
        if ok:
            if self.pool.mark_alive(url):
                logger.warning("worker %s is healthy: in rotation", url)
        else:
            self.mark_dead(url, f"/health failed: {detail}")

    def mark_dead(self, url: str, reason: str) -> None:
        if self.pool.mark_dead(url, reason):
            logger.error("worker %s out of rotation: %s (live: %s)", url, reason,
                         self.pool.live() or "none")

    async def get(self, url: str, path: str, headers: dict[str, str] | None = None
                  ) -> tuple[int, bytes]:
        async with self.session.get(url + path, headers=headers) as resp:
            return resp.status, await resp.read()

    async def post_json(self, url: str, path: str, body: Any,
                        headers: dict[str, str]) -> tuple[int, bytes]:
        async with self.session.post(url + path, json=body, headers=headers) as resp:
            return resp.status, await resp.read()

    async def gather_get(self, path: str, headers: dict[str, str]
                         ) -> dict[str, tuple[int, bytes] | str]:
        """``path`` from every live worker: url -> (status, body), or the failure's text."""
        urls = self.pool.live()
        outs = await asyncio.gather(*(self.get(u, path, headers) for u in urls),
                                    return_exceptions=True)
        result: dict[str, tuple[int, bytes] | str] = {}
        for url, out in zip(urls, outs):
            if isinstance(out, BaseException):
                if not isinstance(out, WORKER_ERRORS):
                    raise out
                result[url] = f"unreachable: {out!r}"
                self.check_soon(url)
            else:
                result[url] = out
        return result


def describe(exc: BaseException) -> str:
    """A worker failure in one line: its type and message."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def _message(raw: bytes, status: int) -> str:
    """The ``error.message`` of a JSON error body, else the raw text (short)."""
    try:
        body = json.loads(raw)
        return str(body["error"]["message"])
    except (ValueError, KeyError, TypeError):
        return f"status {status}: {raw[:300].decode('utf-8', 'replace')}"
