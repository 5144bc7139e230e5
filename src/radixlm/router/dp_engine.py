"""``DataParallelEngine``: ``dp_size`` engine replicas in one process behind one API.

Each replica is a full :class:`Engine` (its own scheduler, KV pool and radix cache; TP if
``tp_size > 1``). Every request is tokenized once here, routed by the policy
(``load_balance_method``) over the live replicas with their in-flight counts, and sent to the
chosen replica as token ids. A replica whose processes died leaves the rotation and is
reported by :meth:`replica_status`; its in-flight requests get the replica's error.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from ..runtime.api.engine import Engine
from ..runtime.server_args import ServerArgs
from .policy import make_policy

logger = logging.getLogger(__name__)


class DataParallelEngine:
    """Start with ``DataParallelEngine(model_path=..., dp_size=N, **server_args)``."""

    def __init__(self, model_path: str, **kwargs: Any) -> None:
        args = ServerArgs.from_kwargs(model_path=str(model_path), **kwargs)
        self.server_args = args
        replica_args = dataclasses.replace(args, dp_size=1)
        self.replicas: list[Engine] = []
        try:
            for _ in range(args.dp_size):
                self.replicas.append(Engine(server_args=replica_args))
        except BaseException:
            self.shutdown()
            raise
        self.tokenizer = self.replicas[0].tokenizer
        self.policy = make_policy(args.load_balance_method,
                                  cache_threshold=args.cache_threshold,
                                  balance_abs_threshold=args.balance_abs_threshold)
        self.loads = {i: 0 for i in range(args.dp_size)}  # in flight per live replica
        self.routed = [0] * args.dp_size
        self.dead: dict[int, str] = {}
        self.max_spread = 0  # largest max - min in-flight seen at a routing decision
        self._lock = threading.Lock()

    # -- routing --------------------------------------------------------------------------

    def _refresh(self) -> None:
        for i, engine in enumerate(self.replicas):
            problem = None if engine._procs is None else engine._procs.health()
            if i not in self.dead and (problem or engine._procs is None):
                self.dead[i] = problem or "shut down"
                self.loads.pop(i, None)
                self.policy.remove(i)
                logger.warning("replica %d out of rotation: %s", i, self.dead[i])

    @contextmanager
    def _routed(self, tokens: list[int]) -> Iterator[int]:
        with self._lock:
            self._refresh()
            if self.loads:
                spread = max(self.loads.values()) - min(self.loads.values())
                self.max_spread = max(self.max_spread, spread)
            pick = self.policy.choose(tokens, self.loads)
            self.loads[pick] += 1
            self.routed[pick] += 1
        try:
            yield pick
        finally:
            with self._lock:
                if pick in self.loads:
                    self.loads[pick] -= 1

    def _tokens(self, prompt: str | None, input_ids: list[int] | None) -> list[int]:
        if input_ids is not None:
            return list(input_ids)
        if prompt is None:
            raise ValueError("give prompt or input_ids")
        return self.tokenizer(prompt).input_ids

    # -- API ------------------------------------------------------------------------------

    def generate(self, prompt: str | None = None, sampling_params: dict | None = None,
                 input_ids: list[int] | None = None, stream: bool = False,
                 **fields: Any) -> dict[str, Any] | Iterator[dict[str, Any]]:
        """One prompt (text or ids), as :meth:`Engine.generate`; ``meta_info['dp_rank']``
        names the replica that served it."""
        if isinstance(prompt, list) or (input_ids and isinstance(input_ids[0], list)):
            raise ValueError("DataParallelEngine.generate takes one prompt per call "
                             "(call it from several threads for concurrency)")
        tokens = self._tokens(prompt, input_ids)
        if stream:
            return self._stream(tokens, sampling_params, fields)
        with self._routed(tokens) as pick:
            out = self.replicas[pick].generate(input_ids=tokens,
                                               sampling_params=sampling_params, **fields)
        out["meta_info"]["dp_rank"] = pick
        return out

    def _stream(self, tokens: list[int], sampling_params: dict | None,
                fields: dict[str, Any]) -> Iterator[dict[str, Any]]:
        with self._routed(tokens) as pick:
            for chunk in self.replicas[pick].generate(
                    input_ids=tokens, sampling_params=sampling_params, stream=True, **fields):
                chunk["meta_info"]["dp_rank"] = pick
                yield chunk

    def abort_request(self, rid: str) -> None:
        """Abort ``rid`` wherever it runs (unknown ids are ignored by the others)."""
        for i, engine in enumerate(self.replicas):
            if i not in self.dead:
                engine.abort_request(rid)

    def replica_status(self) -> list[dict[str, Any]]:
        """Per replica: alive, in flight, routed so far, and why it left the rotation."""
        with self._lock:
            self._refresh()
            return [{"dp_rank": i, "alive": i not in self.dead, "in_flight": self.loads.get(i, 0),
                     "routed": self.routed[i], "error": self.dead.get(i)}
                    for i in range(len(self.replicas))]

    def get_server_info(self) -> dict[str, Any]:
        """Each live replica's server info, plus the router's view."""
        status = self.replica_status()
        infos = [None if s["error"] else self.replicas[s["dp_rank"]].get_server_info()
                 for s in status]
        return {"replicas": status, "replica_info": infos,
                "load_balance_method": self.server_args.load_balance_method}

    def flush_cache(self) -> bool:
        return all(e.flush_cache() for i, e in enumerate(self.replicas) if i not in self.dead)

    def shutdown(self) -> None:
        for engine in self.replicas:
            engine.shutdown()

    def __enter__(self) -> DataParallelEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
