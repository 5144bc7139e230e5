"""Logprobs over the OpenAI API, in SGLang's native ``meta_info`` shape.

A gen with ``return_logprob`` asks the server for logprobs (completions: ``logprobs=N``;
chat: ``logprobs=true`` + ``top_logprobs=N``) and its meta info gets
``output_token_logprobs`` (one ``[logprob, token_id, text]`` per generated token),
``output_top_logprobs`` (per token, the top ``top_logprobs_num`` alternatives in the same
shape) and ``output_token_logprobs_length``. Streamed chunks carry only the new tokens' entries
(SGLang's streaming contract), with ``output_token_logprobs_length`` and ``completion_tokens``
counting every token so far.

What the API cannot tell: the OpenAI API gives a token's text, not its id, so ``token_id`` is
``None`` unless the server spells tokens as ids (vLLM's ``return_tokens_as_token_ids`` writes
``token_id:123``; those are read). ``text`` is ``None`` unless the gen asked
``return_text_in_logprobs``, as on the native API. ``input_token_logprobs`` (prompt logprobs
from ``logprob_start_len``) are not filled: a completion's prompt logprobs need ``echo``,
which the API does not combine with a generated answer in one request.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..sampling import SglSamplingParams

_TOKEN_ID = re.compile(r"token_id:(\d+)")


def logprob_request(params: SglSamplingParams, is_chat: bool) -> dict[str, Any]:
    """The request fields that ask for logprobs (none unless the gen returns logprobs)."""
    if not params.return_logprob:
        return {}
    top = params.top_logprobs_num or 0
    if is_chat:
        return {"logprobs": True, **({"top_logprobs": top} if top else {})}
    return {"logprobs": top}


def _entry(logprob: float | None, token: str, with_text: bool) -> list[Any]:
    match = _TOKEN_ID.fullmatch(token)
    return [logprob, int(match.group(1)) if match else None,
            token if with_text and not match else None]


def choice_logprobs(lp: Any, is_chat: bool, with_text: bool) -> tuple[list, list]:
    """(output_token_logprobs, output_top_logprobs) of one choice's (or stream chunk's)
    ``logprobs`` object; empty lists when the server sent none."""
    if lp is None:
        return [], []
    if is_chat:
        content = lp.content or []
        return ([_entry(t.logprob, t.token, with_text) for t in content],
                [[_entry(a.logprob, a.token, with_text) for a in (t.top_logprobs or [])]
                 for t in content])
    tokens = lp.tokens or []
    tops = lp.top_logprobs or [None] * len(tokens)
    return ([_entry(v, t, with_text) for t, v in zip(tokens, lp.token_logprobs or [])],
            [[_entry(v, t, with_text) for t, v in (top or {}).items()] for top in tops])


class StreamLogprobs:
    """Per-chunk logprob meta info of one streamed gen: each chunk's new entries, and the
    counts of all tokens so far."""

    def __init__(self, params: SglSamplingParams, is_chat: bool) -> None:
        self.wanted = bool(params.return_logprob)
        self.is_chat = is_chat
        self.with_text = bool(params.return_text_in_logprobs)
        self.count = 0

    def chunk_meta(self, lp: Any) -> dict[str, Any]:
        if not self.wanted:
            return {}
        entries, tops = choice_logprobs(lp, self.is_chat, self.with_text)
        self.count += len(entries)
        return {"output_token_logprobs": entries, "output_top_logprobs": tops,
                "output_token_logprobs_length": self.count, "completion_tokens": self.count}
