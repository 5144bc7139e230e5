"""Turn what a user passes as a backend (a backend, a Runtime, a radixlm Engine) into one."""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .base import BaseBackend

_engine_backends: weakref.WeakKeyDictionary[Any, BaseBackend] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _is_engine(obj: Any) -> bool:
    # Duck-typed so that lang does not import the runtime: radixlm's Engine has these.
    return all(hasattr(obj, a) for a in ("generate", "tokenizer", "server_args",
                                          "flush_cache"))


def as_backend(obj: Any) -> BaseBackend:
    """``obj`` as a backend: itself, a Runtime's endpoint, or an Engine wrapped in-process
    (one wrapper per engine)."""
    if obj is None:
        raise ValueError("no backend: pass backend=... or call set_default_backend(...) first")
    if isinstance(obj, BaseBackend):
        return obj
    endpoint = getattr(obj, "endpoint", None)
    if isinstance(endpoint, BaseBackend):
        return endpoint
    if _is_engine(obj):
        from .engine_backend import EngineBackend

        with _lock:
            backend = _engine_backends.get(obj)
            if backend is None:
                backend = _engine_backends[obj] = EngineBackend(obj)
            return backend
    raise TypeError(f"expected a backend (RuntimeEndpoint, Runtime, Engine or a BaseBackend), "
                    f"got {type(obj).__name__}")
