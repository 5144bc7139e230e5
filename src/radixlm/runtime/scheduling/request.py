"""A request's state inside the scheduler, from arrival to finish."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any, overload

from ..memory.kv_manager import ReqKV
from ..wire.messages import DetokParams, FinishReason, GenerateReq
from ..wire.sampling_params import SamplingParams


class RequestError(ValueError):
    """A request cannot be served (bad input); the engine carries on."""


class TokenSlice(Sequence[int]):
    """A read-only live view of ``ids[start:stop]`` (``stop`` None: to the end as it grows).

    Indexing and ``len`` cost O(1); slicing copies only the slice, as a list.
    """

    __slots__ = ("_ids", "_start", "_stop")

    def __init__(self, ids: list[int], start: int, stop: int | None = None) -> None:
        self._ids, self._start, self._stop = ids, start, stop

    def __len__(self) -> int:
        return (len(self._ids) if self._stop is None else self._stop) - self._start

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> list[int]: ...
    def __getitem__(self, i: int | slice) -> int | list[int]:
        n = len(self)
        if isinstance(i, slice):
            a, b, step = i.indices(n)
            return self._ids[self._start + a : self._start + max(a, b) : step] if step == 1 \
                else [self._ids[self._start + k] for k in range(a, b, step)]
        if not -n <= i < n:
            raise IndexError("token index out of range")
        return self._ids[self._start + (i if i >= 0 else n + i)]

    def __iter__(self) -> Iterator[int]:
        return islice(self._ids, self._start, self._start + len(self))

    def __repr__(self) -> str:
        return f"TokenSlice({self[:]!r})"


@dataclass
class Req:
    """Scheduler-side request.

    ``token_ids`` holds the prompt then the output so far in ONE list (``prompt_len`` tells
    them apart), as nano-vllm's ``Sequence`` does: every position must have KV before the
    next token can be sampled, and the scheduler reaches it 5+ times per running request per
    step, so prompt and output are never concatenated. After a retraction the output is
    re-prefilled with the prompt.
    """

    rid: str
    token_ids: list[int]  # prompt + output; mutated only through the output methods below
    prompt_len: int
    sampling: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1
    top_logprobs_num: int = 0
    stream: bool = False
    namespace: str = ""
    stop_strs: list[str] = field(default_factory=list)
    kv: ReqKV | None = None
    cached_tokens: int = -1  # prefix served by the cache at first admission (-1: not yet)
    finish_reason: FinishReason | None = None
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
    grammar_after: str | None = None  # that marker (the request's, else the server's)
    grammar_start: int = 0  # output index where the constraint began
    grammar_error: str | None = None  # a budget hit while decoding: the request ends with it
    # the last token's grammar advance, deferred to the compiler's worker (an AdvanceDeferred
    # of grammar_manager): the request is held until the scheduler can make it cheaply
    grammar_pending: Any = None
    # the output is closed within max_new_tokens (its masks cut near the limit; see
    # GrammarManager.admit), and whether a cut removed a token the grammar allowed
    grammar_closing: bool = False
    budget_closed: bool = False
    mask_held_steps: int = 0  # consecutive steps held out because its mask was not ready
    pending_rollback: int = 0
    first_token_time: float = 0.0
    # speculative decoding: whether this request may (server setting, not opted out); its
    # prompt-lookup indexes (token ids, text) and its draft budget (built on first use)
    speculative: bool = False
    # its latest step was wide (no drafts: see speculative_drafts): advances jump forward
    plain_step: bool = False
    draft_index: Any = None
    draft_budget: Any = None
    text_lookup: Any = None

    @classmethod
    def from_message(cls, msg: GenerateReq) -> Req:
        return cls(
            rid=msg.rid,
            token_ids=list(msg.input_ids),
            prompt_len=len(msg.input_ids),
            sampling=msg.sampling,
            return_logprob=msg.return_logprob,
            logprob_start_len=msg.logprob_start_len,
            top_logprobs_num=msg.top_logprobs_num,
            stream=msg.stream,
            namespace=msg.namespace,
            stop_strs=list(msg.stop_strs) or msg.sampling.stop_strs,
        )

    # -- the token list ---------------------------------------------------------------------

    @property
    def input_ids(self) -> TokenSlice:
        """The prompt (a view of ``token_ids``)."""
        return TokenSlice(self.token_ids, 0, self.prompt_len)

    @property
    def output_ids(self) -> TokenSlice:
        """The output so far (a live view of ``token_ids``; change it with the methods below)."""
        return TokenSlice(self.token_ids, self.prompt_len)

    @property
    def num_output(self) -> int:
        return len(self.token_ids) - self.prompt_len

    def append_output(self, token: int) -> None:
        self.token_ids.append(token)

    def replace_output(self, keep: int, tokens: Sequence[int]) -> None:
        """Keep the first ``keep`` output tokens and put ``tokens`` after them."""
        self.token_ids[self.prompt_len + keep :] = tokens

    def truncate_output(self, n: int) -> None:
        """Keep at most ``n`` output tokens."""
        del self.token_ids[self.prompt_len + n :]

    # -- scheduling arithmetic -----------------------------------------------------------------

    @property
    def has_text_stops(self) -> bool:
        """Whether decoded text can end this request (stop strings or stop regexes)."""
        return bool(self.stop_strs or self.sampling.stop_regex)

    @property
    def kv_len(self) -> int:
        return self.kv.kv_len if self.kv is not None else 0

    @property
    def pending(self) -> int:
        """Tokens of ``token_ids`` without KV yet: 1 for a decoding request (its last sampled
        token), more while prefilling, after a retraction or after a jump-forward."""
        return len(self.token_ids) - self.kv_len

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
    def first_scored(self) -> int:
        """The position whose logits score the first prompt token asked for: position p
        predicts token p + 1, and token 0 (no context) is scored from position 0 as null."""
        return max(self.logprob_start_len - 1, 0)

    def scored_from(self, start: int, n: int) -> int | None:
        """First position in the chunk ``[start, start + n)`` whose logits are needed for
        prompt logprobs, or None if the chunk needs none."""
        if not self.wants_input_logprobs:
            return None
        first = self.first_scored
        if first >= start + n:
            return None
        return max(first, start)

    @property
    def max_reuse(self) -> int:
        """Longest prefix the cache may serve: the last token must be computed (its logits
        are needed), and so must every position whose prompt logprob was asked for."""
        limit = len(self.token_ids) - 1
        if self.wants_input_logprobs:
            limit = min(limit, self.first_scored)
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


@dataclass
class PrefillChunk:
    """The part of a request's prefill computed in one step: positions ``[start, start + n)``."""

    req: Req
    start: int
    n: int
