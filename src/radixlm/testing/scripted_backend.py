"""A scripted language backend (no model): answers every gen with ``reply(text, params)`` and
every select with the longest choice, recording what it saw. The language tests use it to test
the interpreter alone."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from ..lang.backend.base import BaseBackend
from ..lang.choices import ChoicesDecision


class ScriptedBackend(BaseBackend):
    """Answers every gen with ``reply(text_so_far, params)`` and every select with the
    longest choice; records the requests it saw. Used to test the interpreter alone."""

    def __init__(self, reply: Any = None) -> None:
        super().__init__()
        self.reply = reply or (lambda text, params: f"<{len(text)}>")
        self.calls: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def _log(self, kind: str, text: str) -> None:
        with self.lock:
            self.calls.append((kind, text))

    def generate(self, s, sampling_params):
        self._log("gen", s.text_)
        out = self.reply(s.text_, sampling_params)
        s.record_usage("gen", {"prompt_tokens": len(s.text_), "cached_tokens": 0,
                               "completion_tokens": len(out)})
        return out, {"params": sampling_params}

    def generate_stream(self, s, sampling_params) -> Iterator[tuple[str, Any]]:
        self._log("stream", s.text_)
        out = self.reply(s.text_, sampling_params)
        for ch in out:
            time.sleep(0.002)  # let readers see the chunks one by one
            yield ch, {"params": sampling_params}

    def select(self, s, choices, temperature, choices_method):
        self._log("select", s.text_)
        return ChoicesDecision(max(choices, key=len), {"choices": choices})

    def commit_lazy_operations(self, s) -> None:
        self._log("prefill", s.text_)

    def cache_prefix(self, prefix_str: str) -> None:
        self._log("cache_prefix", prefix_str)
