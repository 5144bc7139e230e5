"""``RouterArgs``: every setting of ``radixlm router``, one frozen dataclass validated on
construction. Flag names follow sgl-router's (``--worker-urls``, ``--policy``,
``--cache-threshold``, ``--balance-abs-threshold``, ``--balance-rel-threshold``,
``--max-tree-size``, ``--health-check-interval-secs``, ``--request-timeout-secs``)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ..dataclass_cli import add_field_flags, given_values

POLICIES = ("cache_aware", "round_robin", "shortest_queue")


@dataclass(frozen=True)
class RouterArgs:
    """Validated on construction; bad values are refused naming the field and the remedy."""

    worker_urls: tuple[str, ...]
    policy: str = field(default="cache_aware", metadata={
        "help": "cache_aware (prefix affinity balanced against load), round_robin or "
                "shortest_queue"})
    cache_threshold: float = field(default=0.5, metadata={
        "help": "cache_aware: a prefix match covering less than this share of the request "
                "goes to the worker with the smallest tree"})
    balance_abs_threshold: int = field(default=32, metadata={
        "help": "cache_aware: least loaded worker when max - min in-flight exceeds this ..."})
    balance_rel_threshold: float = field(default=1.0001, metadata={
        "help": "... and max exceeds this times min"})
    max_tree_size: int = field(default=1 << 22, metadata={
        "help": "cache_aware: most (node, worker) marks the routing tree keeps (LRU)"})
    host: str = "127.0.0.1"
    port: int = 30000
    health_check_interval_secs: float = field(default=10.0, metadata={
        "help": "how often every worker's /health is polled (a dead one leaves the "
                "rotation, a recovered one rejoins)"})
    health_check_timeout_secs: float = 5.0
    request_timeout_secs: float = field(default=1800.0, metadata={
        "help": "longest a proxied request may take"})
    max_payload_size: int = field(default=512 * 1024 * 1024, metadata={
        "help": "largest request body in bytes (413 beyond)"})

    def __post_init__(self) -> None:
        if not self.worker_urls:
            raise ValueError("worker_urls: give at least one worker URL "
                             "(e.g. --worker-urls http://10.0.0.2:30000)")
        urls = tuple(u.rstrip("/") for u in self.worker_urls)
        for url in urls:
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname or not parts.port:
                raise ValueError(f"worker_urls: {url!r} is not http(s)://host:port")
        if len(set(urls)) != len(urls):
            raise ValueError(f"worker_urls: a worker is listed twice in {list(urls)}")
        object.__setattr__(self, "worker_urls", urls)
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, got {self.policy!r}")
        if not 0 <= self.cache_threshold <= 1:
            raise ValueError(f"cache_threshold must be in [0, 1], got {self.cache_threshold}")
        if self.balance_abs_threshold < 0:
            raise ValueError("balance_abs_threshold must be >= 0")
        if self.balance_rel_threshold < 1:
            raise ValueError("balance_rel_threshold must be >= 1")
        if not 0 <= self.port < 65536:
            raise ValueError(f"port must be in [0, 65535], got {self.port}")
        for name in ("max_tree_size", "max_payload_size", "health_check_interval_secs",
                     "health_check_timeout_secs", "request_timeout_secs"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")

    @classmethod
    def add_cli_args(cls, parser: argparse.ArgumentParser) -> None:
        """One ``--flag-name`` per field (sgl-router spelling)."""
        add_field_flags(parser, cls, {
            "worker_urls": {"nargs": "+", "required": True, "metavar": "URL",
                            "help": "the `radixlm serve` instances to route over"},
            "policy": {"choices": POLICIES}})

    @classmethod
    def from_cli_args(cls, ns: argparse.Namespace) -> RouterArgs:
        values = given_values(cls, ns)
        values["worker_urls"] = tuple(values.get("worker_urls", ()))
        return cls(**values)
