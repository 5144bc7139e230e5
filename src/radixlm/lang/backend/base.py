"""The interface between the interpreter and a model server."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..chat_template import get_chat_template

if TYPE_CHECKING:
    from ..choices import ChoicesDecision, ChoicesSamplingMethod
    from ..interpreter import StreamExecutor
    from ..ir import SglImage, SglVideo
    from ..sampling import SglSamplingParams


class BaseBackend:
    """A backend executes a program's gen/select/prefill nodes. ``s`` is the program's
    executor: ``s.text_`` is the text so far. This base serves only tracing (it has a chat
    template and nothing else)."""

    is_chat_model = False
    support_concate_and_append = False

    def __init__(self) -> None:
        self.chat_template: Any = get_chat_template("default")

    def get_model_name(self) -> str:
        return "none"

    def get_chat_template(self) -> Any:
        return self.chat_template

    def cache_prefix(self, prefix_str: str) -> None:
        """Prefill ``prefix_str`` so that later requests starting with it hit the cache."""

    def commit_lazy_operations(self, s: StreamExecutor) -> None:
        """Prefill ``s.text_`` (before a fork)."""

    def generate(self, s: StreamExecutor, sampling_params: SglSamplingParams
                 ) -> tuple[str | list[str], Any]:
        raise NotImplementedError(f"{type(self).__name__} cannot generate")

    def generate_stream(self, s: StreamExecutor, sampling_params: SglSamplingParams
                        ) -> Iterator[tuple[str, Any]]:
        raise NotImplementedError(f"{type(self).__name__} cannot stream")

    def select(self, s: StreamExecutor, choices: list[str], temperature: float,
               choices_method: ChoicesSamplingMethod) -> ChoicesDecision:
        raise NotImplementedError(f"{type(self).__name__} cannot select")

    def encode_image(self, expr: SglImage | SglVideo) -> str:
        """The image as base64 for the request, or an error on a text-only model."""
        raise ValueError(f"{type(expr).__name__[3:].lower()}(): the model behind "
                         f"{type(self).__name__} ({self.get_model_name()}) is a text-only "
                         f"model; images and videos need a vision-language model")

    def abort(self, rids: list[str]) -> None:
        """Abort requests in flight (a failing program releases its requests)."""

    def end_program(self, s: StreamExecutor) -> None:
        """A program ended (nothing to release for stateless backends)."""

    def flush_cache(self) -> bool:
        return False

    def get_server_info(self) -> dict[str, Any]:
        return {}

    def shutdown(self) -> None:
        pass
