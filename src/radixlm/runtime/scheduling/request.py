"""A request's state inside the scheduler, from arrival to finish."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..memory.kv_manager import ReqKV
from ..wire.messages import DetokParams, GenerateReq
from ..wire.sampling_params import SamplingParams


class RequestError(ValueError):
    """A request cannot be served (bad input); the engine carries on."""


@dataclass
class Req:
    """Scheduler-side request. ``fill_ids`` (prompt + output so far) is what must have KV
    before the next token can be sampled; after a retraction the output is re-prefilled."""

    rid: str
    input_ids: list[int]
    sampling: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    stream: bool = False
    namespace: str = ""
    stop_strs: list[str] = field(default_factory=list)
    output_ids: list[int] = field(default_factory=list)
    kv: ReqKV | None = None
    cached_tokens: int = -1  # prefix served by the cache at first admission (-1: not yet)
    finish_reason: dict[str, Any] | None = None
    arrival: float = field(default_factory=time.monotonic)
    wait_steps: int = 0  # steps passed over while waiting (lpm aging)
    sent_ids: int = 0  # output ids already sent downstream
    sent_first: bool = False
    forced_tokens: int = 0  # output tokens appended by jump-forward
    # logprobs accumulated since the last send
    out_logprobs: list[tuple[float, int]] = field(default_factory=list)
    out_top_logprobs: list[list[tuple[float, int]]] = field(default_factory=list)
    in_logprobs: list[tuple[float | None, int]] = field(default_factory=list)
    in_top_logprobs: list[list[tuple[float, int]] | None] = field(default_factory=list)
    in_logprobs_done: bool = False
    in_logprobs_sent: bool = False
    grammar: Any = None  # fsm matcher, when constrained
    grammar_future: Any = None  # pending compile
    grammar_active: bool = True  # False until the reasoning end marker (when configured)
    grammar_start: int = 0  # output index where the constraint began
    grammar_error: str | None = None  # a budget hit while decoding: the request ends with it
    pending_rollback: int = 0
    first_token_time: float = 0.0

    @classmethod
    def from_message(cls, msg: GenerateReq) -> Req:
        return cls(
            rid=msg.rid,
            input_ids=list(msg.input_ids),
            sampling=msg.sampling,
            return_logprob=msg.return_logprob,
            logprob_start_len=msg.logprob_start_len,
            top_logprobs_num=msg.top_logprobs_num,
            stream=msg.stream,
            namespace=msg.namespace,
            stop_strs=list(msg.stop_strs) or msg.sampling.stop_strs,
        )

    @property
    def fill_ids(self) -> list[int]:
        return self.input_ids + self.output_ids

    @property
    def has_text_stops(self) -> bool:
        """Whether decoded text can end this request (stop strings or stop regexes)."""
        return bool(self.stop_strs or self.sampling.stop_regex)

    @property
    def kv_len(self) -> int:
        return self.kv.kv_len if self.kv is not None else 0

    @property
    def pending(self) -> int:
        """Tokens of ``fill_ids`` without KV yet: 1 for a decoding request (its last sampled
        token), more while prefilling, after a retraction or after a jump-forward."""
        return len(self.fill_ids) - self.kv_len
    @property
    def is_decoding(self) -> bool:
        """One token without KV and it is an output token: the next step decodes. A chunked
        prefill can also leave exactly one token pending, but that one is a prompt token and
        must go through the prefill path (prompt logprobs, prefill-only finish)."""
        return self.pending == 1 and self.kv_len >= len(self.input_ids)

    @property
    def wants_input_logprobs(self) -> bool:
        return self.return_logprob and self.logprob_start_len >= 0 and not self.in_logprobs_done

    @property
    def max_reuse(self) -> int:
        """Longest prefix the cache may serve: the last token must be computed (its logits
        are needed), and so must every position whose prompt logprob was asked for."""
        limit = len(self.fill_ids) - 1
        if self.wants_input_logprobs:
            limit = min(limit, max(self.logprob_start_len - 1, 0))
        return max(limit, 0)

    def detok_params(self) -> DetokParams:
        p = self.sampling
        return DetokParams(
            skip_special_tokens=p.skip_special_tokens,
            spaces_between_special_tokens=p.spaces_between_special_tokens,
            stop_strs=self.stop_strs,
            stop_regexes=p.stop_regexes,
            no_stop_trim=p.no_stop_trim,
        )
