"""The in-process backend: a radixlm ``Engine`` driven without HTTP.

``set_default_backend(engine)`` (or ``run(backend=engine)``) wraps the engine in this class.
It has the engine's tokenizer, so chat roles use the model's own chat template and select
finds exact token boundaries in a single request.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ..chat_template import chat_template_registry, resolve_chat_template
from .native import NativeBackend

# /generate body field -> Engine.generate keyword
_RENAMED = {"text": "prompt"}


class EngineBackend(NativeBackend):
    """Wraps a started ``radixlm.Engine`` (the engine stays the caller's to shut down)."""

    def __init__(self, engine: Any, chat_template_name: str | None = None) -> None:
        super().__init__()
        self.engine = engine
        self.tokenizer = engine.tokenizer
        args = engine.server_args
        if chat_template_name is None and args.chat_template in chat_template_registry:
            chat_template_name = args.chat_template
        self.chat_template = resolve_chat_template(args.model_path, self.tokenizer,
                                                   chat_template_name)

    def get_model_name(self) -> str:
        return self.engine.server_args.model_path

    def _kwargs(self, body: dict[str, Any]) -> dict[str, Any]:
        return {_RENAMED.get(k, k): v for k, v in body.items()}

    def send(self, body: dict[str, Any]) -> Any:
        return self.engine.generate(**self._kwargs(body))

    def send_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        stream = self.engine.generate(**self._kwargs(body))
        try:
            yield from stream
        finally:
            stream.close()  # a program that stops reading aborts its request

    def select_tokenizer(self) -> Any:
        return self.tokenizer

    def abort(self, rids: list[str]) -> None:
        for rid in rids:
            self.engine.abort_request(rid)

    def flush_cache(self) -> bool:
        return bool(self.engine.flush_cache())

    def get_server_info(self) -> dict[str, Any]:
        return self.engine.get_server_info()
