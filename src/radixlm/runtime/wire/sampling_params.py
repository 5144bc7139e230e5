"""Sampling parameters: SGLang's native names and defaults, validated with errors naming the field.

``max_new_tokens=0`` means prefill only (the prompt is cached and prompt logprobs can be
returned); ``temperature=0`` means greedy. Unknown fields and wrong types are refused.
"""

from __future__ import annotations

import math
from typing import Any

import msgspec

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


class SamplingParamsError(ValueError):
    """A sampling parameter is unknown, mistyped or out of range; the message names it."""


class SamplingParams(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    max_new_tokens: int = 128
    min_new_tokens: int = 0
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    min_p: float = 0.0
    frequency_penalty: float = 0.0
    presence_penalty: float = 0.0
    repetition_penalty: float = 1.0
    n: int = 1
    ignore_eos: bool = False
    skip_special_tokens: bool = True
    spaces_between_special_tokens: bool = True
    no_stop_trim: bool = False
    seed: int | None = None
    regex: str | None = None
    json_schema: str | None = None
    choices: list[str] | None = None
    json_object: bool = False  # any JSON value (OpenAI response_format json_object)
    ebnf: str | None = None
    structural_tag: str | None = None
    custom_params: dict[str, Any] | None = None

    @property
    def stop_strs(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def is_greedy(self) -> bool:
        return self.temperature < 1e-5 or self.top_k == 1

    @property
    def has_grammar(self) -> bool:
        return bool(self.regex or self.json_schema or self.choices or self.json_object)

    @property
    def uses_penalties(self) -> bool:
        return (self.frequency_penalty != 0.0 or self.presence_penalty != 0.0
                or self.repetition_penalty != 1.0)


_ALIASES = {"sampling_seed": "seed", "max_tokens": "max_new_tokens"}


def parse_sampling_params(raw: dict[str, Any] | SamplingParams | None) -> SamplingParams:
    """Validate a user dict (or pass a struct through) into :class:`SamplingParams`."""
    if raw is None:
        return SamplingParams()
    if isinstance(raw, SamplingParams):
        params = raw
    else:
        if not isinstance(raw, dict):
            raise SamplingParamsError(
                f"sampling_params must be an object, got {type(raw).__name__}"
            )
        data = {_ALIASES.get(k, k): v for k, v in raw.items()}
        try:
            params = msgspec.convert(data, SamplingParams, strict=False)
        except msgspec.ValidationError as exc:
            raise SamplingParamsError(f"invalid sampling_params: {_field_message(exc)}") from None
    check_ranges(params)
    return params


def _field_message(exc: msgspec.ValidationError) -> str:
    # msgspec says e.g. "Expected `int`, got `str` - at `$.max_new_tokens`"; name the field.
    text = str(exc)
    if " - at `$." in text:
        what, where = text.split(" - at `$.", 1)
        return f"field {where.rstrip('`')!r}: {what}"
    if "unknown field" in text:
        return text.replace("Object contains unknown field", "unknown field")
    return text


def check_ranges(p: SamplingParams) -> None:
    """Semantic checks (the types were checked on decode)."""
    _check_numbers(p)
    _check(p.max_new_tokens >= 0, "max_new_tokens", "must be >= 0", p.max_new_tokens)
    _check(p.min_new_tokens >= 0, "min_new_tokens", "must be >= 0", p.min_new_tokens)
    _check(p.min_new_tokens <= p.max_new_tokens, "min_new_tokens", "must be <= max_new_tokens",
           p.min_new_tokens)
    _check(p.temperature >= 0, "temperature", "must be >= 0", p.temperature)
    _check(0 < p.top_p <= 1, "top_p", "must be in (0, 1]", p.top_p)
    _check(p.top_k == -1 or p.top_k >= 1, "top_k", "must be -1 (off) or >= 1", p.top_k)
    _check(0 <= p.min_p <= 1, "min_p", "must be in [0, 1]", p.min_p)
    _check(-2 <= p.frequency_penalty <= 2, "frequency_penalty", "must be in [-2, 2]",
           p.frequency_penalty)
    _check(-2 <= p.presence_penalty <= 2, "presence_penalty", "must be in [-2, 2]",
           p.presence_penalty)
    _check(0 < p.repetition_penalty <= 2, "repetition_penalty", "must be in (0, 2]",
           p.repetition_penalty)
    _check(1 <= p.n <= 64, "n", "must be in [1, 64]", p.n)
    _check(all(s for s in p.stop_strs), "stop", "must not contain empty strings", p.stop)
    _check(p.stop_token_ids is None or all(t >= 0 for t in p.stop_token_ids),
           "stop_token_ids", "must be non-negative", p.stop_token_ids)
    grammars = [name for name in ("regex", "json_schema", "choices", "ebnf", "structural_tag")
                if getattr(p, name)] + (["json_object"] if p.json_object else [])
    _check(len(grammars) <= 1, "regex/json_schema/choices/ebnf", "at most one may be set",
           grammars)
    _check(not p.ebnf, "ebnf", "is not supported (use regex or json_schema)", "<grammar>")
    _check(not p.structural_tag, "structural_tag", "is not supported", "<tag>")
    _check(p.choices is None or len(p.choices) > 0, "choices", "must not be empty", p.choices)


def _check_numbers(p: SamplingParams) -> None:
    # Every number must be finite and fit the 64-bit msgpack wire: inf/nan or a huge int
    # would otherwise pass the range checks below or fail in the encoder (a 500).
    for name in p.__struct_fields__:
        value = getattr(p, name)
        values = value if name == "stop_token_ids" and value is not None else [value]
        for v in values:
            if isinstance(v, float):
                _check(math.isfinite(v), name, "must be a finite number", v)
            elif isinstance(v, int) and not isinstance(v, bool):
                _check(INT64_MIN <= v <= INT64_MAX, name, "must fit in 64 bits", v)


def _check(ok: bool, field: str, rule: str, got: Any) -> None:
    if not ok:
        raise SamplingParamsError(f"sampling_params.{field} {rule}, got {got!r}")
