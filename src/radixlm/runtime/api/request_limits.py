"""Checks on a request that need the served model: vocabulary, context length, prompt size.

Run at the API (before anything reaches the scheduler), so one request can never ask the
engine for more top logprobs than the vocabulary holds, token ids it does not have, or more
new tokens than fit the context (vLLM's rule: ``max_tokens <= context - prompt``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..server_args import ServerArgs
from .generate_request import GenerateItem, RequestValidationError
from .json_body import MAX_SCHEMA_DEPTH, loads_strict


@dataclass(frozen=True)
class RequestLimits:
    """What one request may ask of the served model."""

    max_context: int
    vocab_size: int
    max_prompt_chars: int

    def __post_init__(self) -> None:
        for name in ("max_context", "vocab_size", "max_prompt_chars"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")

    @classmethod
    def from_engine(cls, args: ServerArgs, info: Mapping[str, Any]) -> RequestLimits:
        """From the scheduler's start-up report (``EngineProcesses.info``)."""
        return cls(max_context=int(info["max_context"]), vocab_size=int(info["vocab_size"]),
                   max_prompt_chars=args.max_prompt_chars)

    def check_text(self, item: GenerateItem) -> None:
        """Before tokenizing: the prompt's size in characters, a JSON schema's nesting."""
        schema = item.sampling.json_schema
        if schema is not None:
            loads_strict(schema, MAX_SCHEMA_DEPTH, "sampling_params.json_schema")
        if item.text is not None and len(item.text) > self.max_prompt_chars:
            raise RequestValidationError(
                f"the prompt has {len(item.text)} characters; this server accepts at most "
                f"{self.max_prompt_chars} (--max-prompt-chars)")

    def check_tokens(self, item: GenerateItem, prompt_ids: list[int]) -> None:
        """After tokenizing: ids, logprob counts and the output length against the model."""
        vocab = self.vocab_size
        bad = [t for t in prompt_ids if not 0 <= t < vocab]
        if bad:
            raise RequestValidationError(f"input_ids contain ids outside [0, {vocab}): "
                                         f"{bad[:5]}")
        stops = [t for t in item.sampling.stop_token_ids or () if not 0 <= t < vocab]
        if stops:
            raise RequestValidationError(f"stop_token_ids contain ids outside the vocabulary "
                                         f"[0, {vocab}): {stops[:5]}")
        if item.top_logprobs_num > vocab:
            raise RequestValidationError(f"top_logprobs_num ({item.top_logprobs_num}) exceeds "
                                         f"the vocabulary size ({vocab})")
        n, wanted = len(prompt_ids), item.sampling.max_new_tokens
        # A prompt that alone overflows the context is reported by the scheduler's admission.
        if item.explicit_max_new_tokens and n < self.max_context and n + wanted > \
                self.max_context:
            raise RequestValidationError(
                f"max_new_tokens ({wanted}) plus the prompt's {n} tokens exceed the context "
                f"length of {self.max_context}; at most {self.max_context - n} new tokens "
                f"fit (lower max_tokens or shorten the prompt)")
