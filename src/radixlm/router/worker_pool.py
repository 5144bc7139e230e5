"""``WorkerPool``: the HTTP router's view of its workers (pure state, no I/O).

Which workers are in rotation, each one's in-flight count and routed total, why a worker left
the rotation, and which worker holds each request id in flight (so an abort goes to it). The
router does the I/O and reports what it saw (:meth:`mark_dead`, :meth:`mark_alive`); the pool
returns what changed and the router logs it. Used from one event loop: no locks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .policy import NoReplicaError, RoutingPolicy


@dataclass
class WorkerState:
    """One worker as the router sees it."""

    url: str
    alive: bool = True
    in_flight: int = 0
    routed: int = 0
    error: str | None = None  # why it left the rotation (None while alive)


class WorkerPool:
    def __init__(self, urls: Sequence[str], policy: RoutingPolicy) -> None:
        self.workers = {u: WorkerState(u) for u in urls}
        self.policy = policy
        self.rids: dict[str, str] = {}  # rid in flight -> worker url
        self.max_spread = 0  # largest max - min in-flight seen at a routing decision

    def live(self) -> list[str]:
        return [u for u, w in self.workers.items() if w.alive]

    def acquire(self, key: Sequence[int], rids: Sequence[str] = ()) -> str:
        """Choose a live worker for a request keyed ``key`` and count it in flight there;
        raises :class:`NoReplicaError` naming the dead workers when none is live."""
        loads = {u: w.in_flight for u, w in self.workers.items() if w.alive}
        if not loads:
            why = "; ".join(f"{u}: {w.error}" for u, w in self.workers.items())
            raise NoReplicaError(f"no live worker to route to ({why})")
        self.max_spread = max(self.max_spread, max(loads.values()) - min(loads.values()))
        url = self.policy.choose(key, loads)
        worker = self.workers[url]
        worker.in_flight += 1
        worker.routed += 1
        for rid in rids:
            self.rids[rid] = url
        return url

    def release(self, url: str, rids: Sequence[str] = ()) -> None:
        """The request sent to ``url`` finished (however it ended)."""
        self.workers[url].in_flight -= 1
        for rid in rids:
            if self.rids.get(rid) == url:
                del self.rids[rid]

    def holder(self, rid: str) -> str | None:
        """The worker running ``rid`` (or the group of ``rid``'s n sequences), if known."""
        return self.rids.get(rid)

    def mark_dead(self, url: str, reason: str) -> bool:
        """Take ``url`` out of rotation; True if it was in rotation (the caller logs it)."""
        worker = self.workers[url]
        if not worker.alive:
            return False
        worker.alive, worker.error = False, reason
        self.policy.remove(url)  # its cache is gone, or it may return empty
        return True

    def mark_alive(self, url: str) -> bool:
        """Put ``url`` back in rotation; True if it had left it."""
        worker = self.workers[url]
        if worker.alive:
            return False
        worker.alive, worker.error = True, None
        return True

    def status(self) -> list[dict[str, object]]:
        """Per worker: url, alive, in flight, routed so far, why it left the rotation."""
        return [{"url": w.url, "alive": w.alive, "in_flight": w.in_flight,
                 "routed": w.routed, "error": w.error} for w in self.workers.values()]


__all__ = ["NoReplicaError", "WorkerPool", "WorkerState"]
