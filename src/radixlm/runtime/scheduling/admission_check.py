"""Whether a generate request can be served at all, before it is queued: its prompt against
the context length and the KV pool, its ids against the vocabulary, its logprob options.

Pure: the limits come in as arguments; a request that cannot be served raises
:class:`~.request.RequestError` naming the problem (the client's, reported as such).
"""

from __future__ import annotations

from ..wire.messages import GenerateReq
from .request import RequestError


def check_admissible(msg: GenerateReq, max_context: int, kv_capacity: int,
                     vocab_size: int) -> None:
    """Raise :class:`RequestError` unless ``msg`` fits ``max_context`` tokens of context, a
    KV pool of ``kv_capacity`` tokens and a vocabulary of ``vocab_size`` ids."""
    n = len(msg.input_ids)
    if n == 0:
        raise RequestError("the prompt is empty (0 tokens)")
    limit = max_context if msg.sampling.max_new_tokens == 0 else max_context - 1
    if n > limit:
        raise RequestError(f"the prompt has {n} tokens; the context length is "
                           f"{max_context} (at most {limit} prompt tokens)")
    if n + (msg.sampling.max_new_tokens > 0) > kv_capacity:
        raise RequestError(f"the prompt has {n} tokens; the KV pool holds {kv_capacity} "
                           f"(raise --max-total-tokens)")
    bad = [t for t in msg.input_ids if not 0 <= t < vocab_size]
    if bad:
        raise RequestError(f"input_ids contain ids outside [0, {vocab_size}): {bad[:5]}")
    if not 0 <= msg.top_logprobs_num <= vocab_size:
        raise RequestError(f"top_logprobs_num is {msg.top_logprobs_num}; it must be in "
                           f"[0, {vocab_size}] (the vocabulary size)")
    if msg.logprob_start_len >= n and msg.sampling.max_new_tokens > 0:
        raise RequestError(f"logprob_start_len {msg.logprob_start_len} must be < the "
                           f"prompt length {n}")
