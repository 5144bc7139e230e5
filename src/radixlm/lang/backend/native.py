"""Programs compiled into SGLang's native ``/generate`` requests (the part shared by the HTTP
endpoint and the in-process engine; subclasses only move request bodies).

- gen: the whole text so far plus the resolved sampling params (``dtype`` becomes a regex).
- fork: the text so far once, prefill-only (``max_new_tokens: 0``), so branches hit the cache.
- select: all choices scored in one batched prefill-only request (see select_scoring).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ..global_config import global_config
from .base import BaseBackend
from .select_scoring import score_choices
from .tool_calls import parse_tool_calls, with_tool_constraint

if TYPE_CHECKING:
    from ..choices import ChoicesDecision, ChoicesSamplingMethod
    from ..interpreter import StreamExecutor
    from ..sampling import SglSamplingParams

PREFILL_ONLY = {"max_new_tokens": 0}


class NativeBackend(BaseBackend):
    """Subclasses implement :meth:`send`, :meth:`send_stream` and may provide a tokenizer
    (:meth:`select_tokenizer`) for exact select boundaries."""

    def send(self, body: dict[str, Any]) -> Any:
        """POST a ``/generate`` body; a dict (single) or a list (batch) of results."""
        raise NotImplementedError

    def send_stream(self, body: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """POST a streaming ``/generate`` body; cumulative result chunks."""
        raise NotImplementedError

    def select_tokenizer(self) -> Any | None:
        """The server's tokenizer if available here (None: boundaries found from the server's
        token ids, one extra request)."""
        return None

    # -- compiled nodes -------------------------------------------------------------------

    def _gen_body(self, s: StreamExecutor, params: SglSamplingParams, rid: str
                  ) -> dict[str, Any]:
        params = with_tool_constraint(params)
        body = {"text": s.text_, "rid": rid, **params.with_dtype_applied().to_request(
            global_config.skip_special_tokens_in_output,
            global_config.spaces_between_special_tokens_in_out)}
        if s.images_:
            body["image_data"] = [data for _, data in s.images_]
        return body

    def generate(self, s: StreamExecutor, sampling_params: SglSamplingParams
                 ) -> tuple[str | list[str], Any]:
        rid = s.new_rid()
        body = self._gen_body(s, sampling_params, rid)
        with s.requests_in_flight([rid]):
            out = self.send(body)
        if isinstance(out, list):  # n > 1
            for o in out:
                s.record_usage("gen", o["meta_info"])
            return [o["text"] for o in out], [o["meta_info"] for o in out]
        s.record_usage("gen", out["meta_info"])
        if sampling_params.tools:
            return out["text"], {**out["meta_info"], "tool_calls": parse_tool_calls(out["text"])}
        return out["text"], out["meta_info"]

    def generate_stream(self, s: StreamExecutor, sampling_params: SglSamplingParams
                        ) -> Iterator[tuple[str, Any]]:
        rid = s.new_rid()
        body = {**self._gen_body(s, sampling_params, rid), "stream": True}
        pos, meta = 0, None
        with s.requests_in_flight([rid]):
            for chunk in self.send_stream(body):
                text, meta = chunk["text"], chunk["meta_info"]
                yield text[pos:], meta
                pos = len(text)
        if meta is not None:
            s.record_usage("gen", meta)

    def prefill(self, text: str, rid: str | None = None) -> dict[str, Any]:
        """Prefill-only request for ``text``; returns its result (``prompt_tokens`` etc.)."""
        body: dict[str, Any] = {"text": text, "sampling_params": dict(PREFILL_ONLY)}
        if rid is not None:
            body["rid"] = rid
        return self.send(body)

    def commit_lazy_operations(self, s: StreamExecutor) -> None:
        rid = s.new_rid()
        with s.requests_in_flight([rid]):
            out = self.prefill(s.text_, rid)
        s.record_usage("prefill", out["meta_info"])

    def cache_prefix(self, prefix_str: str) -> None:
        if prefix_str:
            self.prefill(prefix_str)

    def select(self, s: StreamExecutor, choices: list[str], temperature: float,
               choices_method: ChoicesSamplingMethod) -> ChoicesDecision:
        if temperature > 1e-5:
            raise ValueError(f"select(): temperature must be 0, got {temperature}")
        return score_choices(self, s, choices, choices_method)
