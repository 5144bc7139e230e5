"""When a request's output is complete: the one finish check after every change to the output.

Both ways the output grows go through :meth:`FinishCheck.check`: a sampled token (which may be
an EOS or stop token) and a jump-forward (forced text, never a stop token). In order: a stop
token, a stop string, ``max_new_tokens``, the context. Stop tokens and strings count only from
``min_new_tokens`` on (the sampler bans EOS and stop ids before that).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from ..wire.messages import FinishLength, FinishReason, FinishStop
from ..wire.stop_conditions import find_stop, stop_str_window
from .request import Req


class FinishCheck:
    """Finish conditions shared by every request of one scheduler."""

    def __init__(self, tokenizer: Any, eos_ids: Collection[int], max_context: int) -> None:
        self.tokenizer = tokenizer
        self.eos_ids = frozenset(eos_ids)
        self.max_context = max_context

    def check(self, req: Req, sampled: int | None, extra: int = 0) -> FinishReason | None:
        """The finish reason after ``req``'s output changed, or None to go on.

        ``sampled``: the token just sampled and appended (None after a jump-forward);
        ``extra``: output tokens appended beyond one (a jump's tokens), so that the stop-string
        window covers all the new text.
        """
        p = req.sampling
        n_out = req.num_output
        if sampled is not None and n_out >= p.min_new_tokens and self.is_stop_token(req, sampled):
            return FinishStop(matched=sampled)
        if req.has_text_stops and n_out >= p.min_new_tokens:
            matched = self.match_stop_str(req, extra)
            if matched is not None:
                return FinishStop(matched=matched)
        if n_out >= p.max_new_tokens:
            return FinishLength(length=p.max_new_tokens)
        if len(req.token_ids) >= self.max_context:
            return FinishLength(length=n_out)
        return None

    def is_stop_token(self, req: Req, token: int) -> bool:
        """Whether ``token`` ends ``req``'s output (once past ``min_new_tokens``): an EOS id
        unless the request ignores EOS, or one of its ``stop_token_ids``."""
        p = req.sampling
        return (not p.ignore_eos and token in self.eos_ids) or bool(
            p.stop_token_ids and token in p.stop_token_ids)

    def match_stop_str(self, req: Req, extra: int = 0) -> str | None:
        """The stop string or stop regex the output now contains, if any. Stop strings need
        only a short tail of the output (as many tokens as the longest has characters, plus
        one, plus ``extra``); a regex may span the whole output, so it is searched whole."""
        regexes = req.sampling.stop_regexes
        window = len(req.output_ids) if regexes else stop_str_window(req.stop_strs) + extra
        tail = self.tokenizer.decode(req.output_ids[-window:],
                                     skip_special_tokens=req.sampling.skip_special_tokens)
        found = find_stop(tail, req.stop_strs, regexes)
        return found.matched if found is not None else None


def eos_ids_of(model_eos: Collection[int], tokenizer: Any) -> list[int]:
    """The model config's EOS ids, plus the tokenizer's if it names another."""
    ids = list(model_eos)
    if getattr(tokenizer, "eos_token_id", None) is not None and \
            tokenizer.eos_token_id not in ids:
        ids.append(tokenizer.eos_token_id)
    return ids
