"""The tokenizer's encode of a jump-forward's text, made cheap for the scheduler's thread.

A jump-forward plan (:func:`~radixlm.fsm.plan_jump_forward`) encodes the last few output tokens'
text with the forced text once per jump. Through ``transformers``' ``encode`` that is a batch of
one (``encode_batch``: a parallel section, argument checks, truncation and padding reset) and
cost 0.12 ms of the scheduler thread's CPU time per jump on SmolLM2 (``benchmarks/json_e2e.py
--scheduler smollm2``, profiled), 3-4 jumps in a step. The Rust backend's own ``encode`` of
the same text gives the same ids in a fraction of it; it is used where that equivalence holds
(the backend truncates and pads nothing and splits special tokens as the wrapper would), the
wrapper's ``encode`` elsewhere. Encodings are cached by text (a bounded table): requests of
one schema force the same keys after the same few tokens.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

CACHE_SIZE = 4096  # texts kept: tens of bytes each, a few tokens


class ForcedTextEncoder:
    """``tokenizer.encode(text, add_special_tokens=False)``, faster and cached (see module
    doc). Safe to call from the scheduler's thread and the compiler's worker at once."""

    def __init__(self, tokenizer: Any, cache_size: int = CACHE_SIZE) -> None:
        self.tokenizer = tokenizer
        self.cache_size = cache_size
        self._cache: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def __call__(self, text: str) -> list[int]:
        with self._lock:
            ids = self._cache.get(text)
            if ids is not None:
                self._cache.move_to_end(text)
                self.hits += 1
                return list(ids)
        ids = tuple(self._encode(text))
        with self._lock:
            self.misses += 1
            self._cache[text] = ids
            if len(self._cache) > self.cache_size:
                self._cache.popitem(last=False)
        return list(ids)

    def _encode(self, text: str) -> list[int]:
        backend = _plain_backend(self.tokenizer)
        if backend is not None:
            return backend.encode(text, add_special_tokens=False).ids
        return self.tokenizer.encode(text, add_special_tokens=False)


def _plain_backend(tokenizer: Any) -> Any:
    """The tokenizer's Rust backend when its ``encode`` gives the wrapper's ids for text without
    special tokens added: it truncates and pads nothing, and splits special tokens exactly
    when the wrapper would; else None (read each call: the wrapper may change them)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None or not hasattr(backend, "encode"):
        return None
    try:
        if backend.truncation is not None or backend.padding is not None:
            return None
        split = bool(getattr(tokenizer, "split_special_tokens", False))
        if bool(backend.encode_special_tokens) != split:
            return None
    except AttributeError:  # a backend without these settings: not the one described
        return None
    return backend
