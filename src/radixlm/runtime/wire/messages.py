"""Every message that crosses a process boundary, as msgspec Structs encoded with msgpack.

No pickle on the wire: each socket carries the tagged union :data:`Message`, so a receiver
decodes any message without knowing its type in advance, and a malformed frame raises
``msgspec.DecodeError`` (the receiver logs and drops it).

Flow: tokenizer manager --(GenerateReq, AbortReq, ControlReq)--> scheduler
      --(TokenBatchOut, ControlOut, ErrorOut)--> detokenizer --(TextBatchOut, ...)-->
      tokenizer manager. Control and error messages pass through the detokenizer unchanged, so
      a request's outputs and its errors arrive in order.
"""

from __future__ import annotations

from typing import Any, Literal, Union

import msgspec

from .sampling_params import SamplingParams


class GrammarReq(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """A constraint on the output: exactly one of the grammar fields is set. ``start_after``
    (e.g. ``</think>``): the constraint starts only after this text appears in the output
    (the request's reasoning end; the server's ``reasoning_end_marker`` when None)."""

    json_schema: str | None = None
    regex: str | None = None
    choices: list[str] | None = None
    json_object: bool = False
    ebnf: str | None = None
    structural_tag: str | None = None  # JSON text
    start_after: str | None = None


class GenerateReq(msgspec.Struct, tag=True, frozen=True):
    """A tokenized generation request (one sequence; ``n > 1`` is expanded before sending)."""

    rid: str
    input_ids: list[int]
    sampling: SamplingParams
    return_logprob: bool = False
    logprob_start_len: int = -1  # -1 = no prompt logprobs
    top_logprobs_num: int = 0
    stream: bool = False
    namespace: str = ""  # radix-cache key prefix: requests in different namespaces never share
    grammar: GrammarReq | None = None
    stop_strs: list[str] = []


class AbortReq(msgspec.Struct, tag=True, frozen=True):
    rid: str


ControlKind = Literal["flush_cache", "server_info", "audit"]


class ControlReq(msgspec.Struct, tag=True, frozen=True):
    """An engine-wide request to the scheduler, answered by a ControlOut with the same ``cid``:
    ``flush_cache`` (drop the radix cache), ``server_info`` (pool, cache and counters) or
    ``audit`` (check the KV ownership invariant; ``args["repair"]`` repairs it)."""

    cid: str
    kind: ControlKind
    args: dict[str, Any] = {}


class DetokParams(msgspec.Struct, frozen=True):
    """How the detokenizer renders one request's text (sent with its first output)."""

    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    stop_strs: list[str] = []
    stop_regexes: list[str] = []
    no_stop_trim: bool = False


class FinishStop(msgspec.Struct, tag_field="type", tag="stop", frozen=True):
    """The output ended at a token or a stop string.

    ``matched`` is the stop string found (str) or else the id of the last output token, the
    one that ended the output (int): the EOS or stop token sampled, or, when the constraint
    ends the output (only EOS could follow), the token that completed the grammar. So an int
    ``matched`` is always ``output_ids[-1]``.
    """

    matched: int | str


class FinishLength(msgspec.Struct, tag_field="type", tag="length", frozen=True,
                   omit_defaults=True):
    """The output reached a length limit: ``max_new_tokens``, the context, or the KV pool."""

    length: int
    # why, when the limit was not max_new_tokens or the context, or when the constraint
    # closed the output within max_new_tokens (scheduling/budget_closing.py: BUDGET_CLOSED)
    message: str | None = None


class FinishAbort(msgspec.Struct, tag_field="type", tag="abort", frozen=True):
    """The request was ended early: by the client, or by its constraint failing."""

    message: str


# A request's finish reason. The HTTP APIs emit it as SGLang does, through
# :func:`finish_reason_json`: {"type": "stop", "matched": ...}, {"type": "length", "length": N}
# or {"type": "abort", "message": ...}.
FinishReason = Union[FinishStop, FinishLength, FinishAbort]  # noqa: UP007 - msgspec tagged union


def finish_reason_json(reason: FinishReason | None) -> dict[str, Any] | None:
    """The JSON object an API response carries for ``reason`` (None while unfinished)."""
    return None if reason is None else msgspec.to_builtins(reason)


class ReqOut(msgspec.Struct, frozen=True):
    """Incremental output of one request from one scheduler step."""

    rid: str
    new_ids: list[int]
    finish_reason: FinishReason | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0
    completion_tokens: int = 0
    # (logprob, token id) per new output token, and top-k alternatives per position.
    output_logprobs: list[tuple[float, int]] = []
    output_top_logprobs: list[list[tuple[float, int]]] = []
    # Prompt logprobs, sent once when prefill completes; first entry may be null (no context).
    input_logprobs: list[tuple[float | None, int]] | None = None
    input_top_logprobs: list[list[tuple[float, int]] | None] | None = None
    # Set when jump-forward retokenized already-sent output: drop this many trailing ids first.
    rollback: int = 0
    detok: DetokParams | None = None  # present on a request's first output
    forced_tokens: int = 0  # output tokens so far that jump-forward appended (not sampled)
    first_token_time: float = 0.0  # wall clock (time.time) of the first output token


class TokenBatchOut(msgspec.Struct, tag=True, frozen=True):
    """Scheduler -> detokenizer: every request that progressed in one step."""

    outs: list[ReqOut]


class TextOut(msgspec.Struct, frozen=True):
    """Detokenizer -> tokenizer manager: text delta for one request."""

    out: ReqOut
    text_delta: str
    # The text so far was revised (jump-forward retokenization): replace it with ``text_delta``.
    text_reset: bool = False


class TextBatchOut(msgspec.Struct, tag=True, frozen=True):
    outs: list[TextOut]


class ControlOut(msgspec.Struct, tag=True, frozen=True):
    cid: str
    ok: bool
    data: dict[str, Any] = {}
    error: str = ""


class ErrorOut(msgspec.Struct, tag=True, frozen=True):
    """A request (``rid``) or, with rid None, the whole scheduler failed."""

    rid: str | None
    message: str
    fatal: bool = False
    code: str = "invalid_request"  # or "internal" (a bug or crash, not the client's fault)


Message = Union[  # noqa: UP007 - msgspec needs a runtime Union of tagged Structs
    GenerateReq, AbortReq, ControlReq, TokenBatchOut, TextBatchOut, ControlOut, ErrorOut
]

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Message)


def encode(msg: Message) -> bytes:
    return _encoder.encode(msg)


def decode(data: bytes) -> Message:
    """Decode one frame; raises ``msgspec.DecodeError`` / ``ValidationError`` if malformed."""
    return _decoder.decode(data)
