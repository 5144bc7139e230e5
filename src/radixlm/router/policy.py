"""Routing policies: which replica gets a request, from its token ids and the replicas' loads.

Pure (no I/O): the router owns the load counts and the set of live replicas and passes them
in; a policy keeps only its own state (a cursor, an :class:`ApproxPrefixTree`).

``cache_aware`` follows sgl-router's cache-aware policy: when the load is imbalanced
(``max - min > balance_abs_threshold`` and ``max > balance_rel_threshold * min``) the least
loaded replica gets the request; otherwise the replica with the longest routed prefix does if
that prefix covers more than ``cache_threshold`` of the request, else the replica whose tree
is smallest (most room in its cache), ties to the least loaded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from .approx_tree import ApproxPrefixTree, Replica


class NoReplicaError(RuntimeError):
    """Every replica is out of rotation."""


class RoutingPolicy(Protocol):
    def choose(self, tokens: Sequence[int], loads: Mapping[Replica, int]) -> Replica:
        """Pick one of ``loads``' keys (the live replicas, with their in-flight counts)."""

    def remove(self, replica: Replica) -> None:
        """``replica`` left the rotation."""


def _least_loaded(loads: Mapping[Replica, int]) -> Replica:
    if not loads:
        raise NoReplicaError("no live replica to route to")
    return min(loads, key=lambda r: loads[r])


@dataclass
class RoundRobin:
    """Each live replica in turn."""

    _next: int = 0

    def choose(self, tokens: Sequence[int], loads: Mapping[Replica, int]) -> Replica:
        if not loads:
            raise NoReplicaError("no live replica to route to")
        live = list(loads)
        pick = live[self._next % len(live)]
        self._next += 1
        return pick

    def remove(self, replica: Replica) -> None:
        pass


@dataclass
class ShortestQueue:
    """The replica with the fewest requests in flight (first one on ties)."""

    def choose(self, tokens: Sequence[int], loads: Mapping[Replica, int]) -> Replica:
        return _least_loaded(loads)

    def remove(self, replica: Replica) -> None:
        pass


@dataclass
class CacheAware:
    """Prefix affinity balanced against load; see the module docstring."""

    cache_threshold: float = 0.5
    balance_abs_threshold: int = 32
    balance_rel_threshold: float = 1.0001
    max_tree_entries: int = 1 << 20
    tree: ApproxPrefixTree = field(default_factory=ApproxPrefixTree)

    def __post_init__(self) -> None:
        if not 0 <= self.cache_threshold <= 1:
            raise ValueError(f"cache_threshold must be in [0, 1], got {self.cache_threshold}")
        if self.balance_abs_threshold < 0 or self.balance_rel_threshold < 1:
            raise ValueError("need balance_abs_threshold >= 0 and balance_rel_threshold >= 1")

    def imbalanced(self, loads: Mapping[Replica, int]) -> bool:
        hi, lo = max(loads.values()), min(loads.values())
        return hi - lo > self.balance_abs_threshold and hi > self.balance_rel_threshold * lo

    def choose(self, tokens: Sequence[int], loads: Mapping[Replica, int]) -> Replica:
        if not loads:
            raise NoReplicaError("no live replica to route to")
        if self.imbalanced(loads):
            pick = _least_loaded(loads)
        else:
            matches = {r: n for r, n in self.tree.match(tokens).items() if r in loads}
            best = max(matches, key=lambda r: (matches[r], -loads[r]), default=None)
            if best is not None and matches[best] > self.cache_threshold * len(tokens):
                pick = best
            else:
                pick = min(loads, key=lambda r: (self.tree.size_of.get(r, 0), loads[r]))
        self.tree.insert(tokens, pick)
        self.tree.evict(self.max_tree_entries)
        return pick

    def remove(self, replica: Replica) -> None:
        self.tree.remove_replica(replica)


def make_policy(name: str, *, cache_threshold: float = 0.5, balance_abs_threshold: int = 32,
                balance_rel_threshold: float = 1.0001,
                max_tree_entries: int = 1 << 20) -> RoutingPolicy:
    """The policy called ``name`` (``--load-balance-method`` / the router's ``--policy``)."""
    if name == "cache_aware":
        return CacheAware(cache_threshold, balance_abs_threshold, balance_rel_threshold,
                          max_tree_entries)
    if name == "round_robin":
        return RoundRobin()
    if name == "shortest_queue":
        return ShortestQueue()
    raise ValueError(f"unknown routing policy {name!r}: cache_aware, round_robin or "
                     "shortest_queue")
