"""``OpenAI``: run programs on any OpenAI-compatible server through the official ``openai``
client (radixlm's own server, vLLM, SGLang, OpenAI).

* Chat models get the program's messages (``s.messages()``) and answer the assistant turn;
  completion models get the program's text as the prompt.
* ``gen``: max_tokens, stop, temperature, top_p, penalties, n; ``regex`` and ``json_schema``
  (and dtypes, turned into a regex) travel as the server extensions ``regex`` /
  ``json_schema`` in ``extra_body`` (chat: ``json_schema`` as ``response_format``), and
  ``top_k`` / ``min_p`` / ``min_tokens`` / ``stop_regex`` likewise.
* ``select``: on a completion model, every choice is scored from the server's prompt
  logprobs (``echo`` + ``logprobs`` + ``max_tokens=0``, what lm-eval-harness uses); the
  choice's tokens are those ending after the prefix (``text_offset``), so a token merged
  across the boundary counts for the choice. Where the server does not offer that (a chat
  model, or it refuses echo), the choice is generated greedily under the regex that matches
  exactly one choice; where that is refused too, select fails saying so.
* Chat models get finished messages only: a gen (or select) must come right after
  ``sgl.assistant`` begins (text before it in the same message could not be sent: the
  server would answer a new message, not continue that text), else a clear error; with
  ``@function(num_api_spec_tokens=N)`` the message's fills and gens are answered by one
  request at the role's end (:mod:`radixlm.lang.api_speculation`), as are a completion
  model's gens that follow each other.
* ``gen(return_logprob=True)``: the API's logprobs become meta info's
  ``output_token_logprobs`` etc. in the native shape, per chunk when streaming
  (:mod:`radixlm.lang.backend.openai_logprobs`, which says what the API cannot tell).
* ``token_usage`` sums the prompt and completion tokens the server reported.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..chat_template import get_chat_template
from ..choices import ChoicesDecision, ChoicesSamplingMethod, mean_logprob
from ..stream_meta import INCREMENTAL_KEYS
from .base import BaseBackend
from .openai_logprobs import StreamLogprobs, choice_logprobs, logprob_request

if TYPE_CHECKING:
    from ..interpreter import StreamExecutor
    from ..sampling import SglSamplingParams

# OpenAI's own completion (non-chat) models; any other name is taken for a chat model
# unless ``is_chat_model`` says otherwise.
COMPLETION_MODELS = ("gpt-3.5-turbo-instruct", "davinci-002", "babbage-002")
_EXTENSIONS = ("top_k", "min_p", "stop_regex", "stop_token_ids", "ignore_eos", "regex",
               "close_within_max_tokens")


class OpenAIBackendError(RuntimeError):
    """The server could not do what the program asked (the message says what and why)."""


@dataclass
class TokenUsage:
    """Tokens the server reported over every request of this backend (thread-safe)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, usage: Any) -> None:
        if usage is None:
            return
        with self._lock:
            self.prompt_tokens += usage.prompt_tokens or 0
            self.completion_tokens += usage.completion_tokens or 0

    def reset(self) -> None:
        with self._lock:
            self.prompt_tokens = self.completion_tokens = 0


class OpenAI(BaseBackend):
    """``OpenAI(model_name, base_url=..., api_key=..., is_chat_model=None)``; extra keyword
    arguments go to ``openai.OpenAI``."""

    supports_api_speculation = True  # honours @function(num_api_spec_tokens=N)

    def __init__(self, model_name: str, base_url: str | None = None,
                 api_key: str | None = None, is_chat_model: bool | None = None,
                 chat_template: Any = None, **client_kwargs: Any) -> None:
        super().__init__()
        import openai

        self._openai = openai
        self.client = openai.OpenAI(base_url=base_url, api_key=api_key, **client_kwargs)
        self.model_name = model_name
        self.is_chat_model = (model_name not in COMPLETION_MODELS if is_chat_model is None
                              else is_chat_model)
        # Chat models render roles themselves (the template only marks them in s.text()).
        self.chat_template = chat_template or get_chat_template("default")
        self.token_usage = TokenUsage()

    def get_model_name(self) -> str:
        return self.model_name

    # -- gen ------------------------------------------------------------------------------

    def _request(self, s: StreamExecutor, params: SglSamplingParams) -> dict[str, Any]:
        p = params.with_dtype_applied()
        body: dict[str, Any] = {"model": self.model_name}
        for ours, theirs in (("max_new_tokens", "max_tokens"), ("temperature", "temperature"),
                             ("top_p", "top_p"), ("frequency_penalty", "frequency_penalty"),
                             ("presence_penalty", "presence_penalty"), ("n", "n")):
            if getattr(p, ours) is not None:
                body[theirs] = getattr(p, ours)
        if p.stop_list():
            body["stop"] = p.stop_list()
        body.update(logprob_request(p, self.is_chat_model))
        extra = {name: getattr(p, name) for name in _EXTENSIONS
                 if getattr(p, name) not in (None, [], ())}
        if p.min_new_tokens:
            extra["min_tokens"] = p.min_new_tokens
        if p.top_k == -1:
            extra.pop("top_k", None)  # disabled: the server's default
        if p.json_schema is not None:
            if self.is_chat_model:
                import json

                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": "output", "schema": json.loads(p.json_schema)}}
            else:
                extra["json_schema"] = p.json_schema
        if extra:
            body["extra_body"] = extra
        if self.is_chat_model:
            body["messages"] = self._messages(s)
        else:
            body["prompt"] = s.text_
        return body

    def _messages(self, s: StreamExecutor) -> list[dict[str, Any]]:
        """The finished messages, for a gen that opens the assistant message."""
        if s.cur_role != "assistant" or len(s.text_) != s.cur_role_begin_pos:
            where = ("outside an assistant message" if s.cur_role != "assistant" else
                     f"after {s.text_[s.cur_role_begin_pos:][-40:]!r} in the assistant message")
            raise OpenAIBackendError(
                f"{self.model_name} is a chat model: it answers whole assistant messages, so "
                f"a gen or select must come right after sgl.assistant begins, not {where}; "
                f"put the text in the user turn, or use @function(num_api_spec_tokens=N) "
                f"to answer the message's gens with one request")
        return list(s.messages_)

    def _call(self, body: dict[str, Any], **kw: Any) -> Any:
        api = self.client.chat.completions if self.is_chat_model else self.client.completions
        try:
            return api.create(**body, **kw)
        except self._openai.APIStatusError as exc:
            raise OpenAIBackendError(f"{self.model_name}: the server refused the request "
                                     f"({exc.status_code}): {exc.message}") from None

    def _create(self, body: dict[str, Any]) -> Any:
        """A non-streamed request, its usage counted."""
        res = self._call(body)
        self.token_usage.add(res.usage)
        return res

    def _text(self, choice: Any) -> str:
        return (choice.message.content or "") if self.is_chat_model else choice.text

    def generate(self, s: StreamExecutor, sampling_params: SglSamplingParams
                 ) -> tuple[str | list[str], Any]:
        res = self._create(self._request(s, sampling_params))
        usage = res.usage.model_dump() if res.usage is not None else {}
        with_text = bool(sampling_params.return_text_in_logprobs)
        metas = [{"finish_reason": c.finish_reason, **usage,
                  **self._logprob_meta(sampling_params, c, with_text)} for c in res.choices]
        texts = [self._text(c) for c in res.choices]
        s.record_usage("gen", {"prompt_tokens": usage.get("prompt_tokens", 0),
                               "completion_tokens": usage.get("completion_tokens", 0),
                               "cached_tokens": 0})
        if len(texts) > 1:
            return texts, metas
        return texts[0], metas[0]

    def _logprob_meta(self, params: SglSamplingParams, choice: Any, with_text: bool
                      ) -> dict[str, Any]:
        if not params.return_logprob:
            return {}
        entries, tops = choice_logprobs(choice.logprobs, self.is_chat_model, with_text)
        return {"output_token_logprobs": entries, "output_top_logprobs": tops,
                "output_token_logprobs_length": len(entries)}

    def generate_stream(self, s: StreamExecutor, sampling_params: SglSamplingParams
                        ) -> Iterator[tuple[str, Any]]:
        """Text pieces, each with its chunk's meta info (logprobs: see openai_logprobs); the
        final usage chunk adds the token counts to the last meta info."""
        logprobs = StreamLogprobs(sampling_params, self.is_chat_model)
        meta: dict[str, Any] = {"finish_reason": None}
        for chunk in self._call(self._request(s, sampling_params), stream=True,
                                stream_options={"include_usage": True}):
            self.token_usage.add(chunk.usage)
            if chunk.usage is not None:
                usage = {"prompt_tokens": chunk.usage.prompt_tokens or 0,
                         "completion_tokens": chunk.usage.completion_tokens or 0,
                         "cached_tokens": 0}
                s.record_usage("gen", usage)
                meta = {k: v for k, v in meta.items() if k not in INCREMENTAL_KEYS}
                yield "", {**meta, **usage}
            if not chunk.choices:
                continue
            c = chunk.choices[0]
            text = (c.delta.content or "") if self.is_chat_model else c.text
            meta = {"finish_reason": c.finish_reason, **logprobs.chunk_meta(c.logprobs)}
            yield text, meta

    # -- select ---------------------------------------------------------------------------

    def select(self, s: StreamExecutor, choices: list[str], temperature: float,
               choices_method: ChoicesSamplingMethod) -> ChoicesDecision:
        if not self.is_chat_model:
            try:
                return self._select_by_logprobs(s, choices, choices_method)
            except OpenAIBackendError as exc:
                refused = str(exc)
        else:
            self._messages(s)  # the chat contract's error, not the fallback's
            refused = "a chat model has no prompt logprobs"
        try:
            return self._select_by_constraint(s, choices)
        except OpenAIBackendError as exc:
            raise OpenAIBackendError(
                f"select() on {self.model_name}: the server offers neither prompt logprobs "
                f"({refused}) nor regex-constrained generation ({exc}); use a completion "
                f"model on a server with echo + logprobs, or one that takes 'regex'") from None

    def _score(self, prefix: str, choice: str) -> list[list[Any]]:
        """(logprob, None, text) of the tokens of ``prefix + choice`` that end after
        ``prefix`` (a token across the boundary belongs to the choice)."""
        res = self._create({"model": self.model_name, "prompt": prefix + choice,
                          "max_tokens": 0, "echo": True, "logprobs": 0, "temperature": 0})
        lp = res.choices[0].logprobs
        if lp is None or not lp.tokens:
            raise OpenAIBackendError("the server returned no prompt logprobs for echo")
        return [[v, None, t] for t, v, at in zip(lp.tokens, lp.token_logprobs, lp.text_offset)
                if at + len(t) > len(prefix)]

    def _select_by_logprobs(self, s: StreamExecutor, choices: list[str],
                            method: ChoicesSamplingMethod) -> ChoicesDecision:
        scored = [self._score(s.text_, c) for c in choices]
        uncond = ([self._score("", c) for c in choices]
                  if method.requires_unconditional_logprobs else None)
        return method(choices=choices,
                      normalized_prompt_logprobs=[mean_logprob(e) for e in scored],
                      input_token_logprobs=scored, output_token_logprobs=[[] for _ in choices],
                      unconditional_token_logprobs=uncond)

    def _select_by_constraint(self, s: StreamExecutor, choices: list[str]) -> ChoicesDecision:
        regex = "(" + "|".join(re.escape(c) for c in choices) + ")"
        longest = max(len(c) for c in choices)
        body = {"model": self.model_name, "temperature": 0, "max_tokens": longest + 8,
                "extra_body": {"regex": regex}}
        if self.is_chat_model:
            body["messages"] = self._messages(s)
        else:
            body["prompt"] = s.text_
        text = self._text(self._create(body).choices[0])
        if text not in choices:
            raise OpenAIBackendError(f"the constrained answer {text!r} is not one of the "
                                     f"choices: the server ignored 'regex'")
        return ChoicesDecision(text, {"select_method": "constrained generation",
                                      "regex": regex})
