"""Sampling parameters: SGLang's native names and defaults, validated with errors naming the field.

``max_new_tokens=0`` means prefill only (the prompt is cached and prompt logprobs can be
returned); ``temperature=0`` means greedy. Unknown fields and wrong types are refused.
"""

from __future__ import annotations

import math
import re
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
    # Python ``re`` patterns: the request stops when the output text matches one (the match
    # and what follows are trimmed, like a stop string).
    stop_regex: str | list[str] | None = None
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
    # Accepted for SGLang compatibility: streaming sends every step (so a per-request interval
    # only changes chunking, which clients must tolerate anyway); beam search and watermarks
    # are refused when asked for.
    stream_interval: int | None = None
    beam_width: int | None = None
    watermark: dict[str, Any] | None = None
    # token id (as a string, the OpenAI spelling, or an int) -> bias added to its logit
    logit_bias: dict[str, float] | None = None
    # radixlm's own: this request never speculates (with --speculative-algorithm set)
    disable_speculation: bool = False

    @property
    def stop_strs(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    @property
    def stop_regexes(self) -> list[str]:
        if self.stop_regex is None:
            return []
        return [self.stop_regex] if isinstance(self.stop_regex, str) else list(self.stop_regex)

    @property
    def is_greedy(self) -> bool:
        return self.temperature < 1e-5 or self.top_k == 1

    @property
    def has_grammar(self) -> bool:
        return bool(self.regex or self.json_schema or self.choices or self.json_object or
                    self.ebnf or self.structural_tag)

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
        if isinstance(data.get("logit_bias"), dict):  # Python callers may key it by int
            data["logit_bias"] = {str(k): v for k, v in data["logit_bias"].items()}
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
    _check_stop_regexes(p.stop_regexes)
    _check(p.beam_width is None or p.beam_width <= 1, "beam_width",
           "is not supported (beam search); leave it unset or 1", p.beam_width)
    _check(not p.watermark, "watermark", "is not supported", p.watermark)
    _check(p.stream_interval is None or p.stream_interval >= 1, "stream_interval",
           "must be >= 1", p.stream_interval)
    _check_logit_bias(p.logit_bias)
    grammars = [name for name in ("regex", "json_schema", "choices", "ebnf", "structural_tag")
                if getattr(p, name)] + (["json_object"] if p.json_object else [])
    _check(len(grammars) <= 1, "regex/json_schema/choices/ebnf", "at most one may be set",
           grammars)
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


MAX_STOP_REGEXES = 16


def _check_stop_regexes(patterns: list[str]) -> None:
    _check(len(patterns) <= MAX_STOP_REGEXES, "stop_regex",
           f"takes at most {MAX_STOP_REGEXES} patterns", len(patterns))
    for pattern in patterns:
        _check(bool(pattern), "stop_regex", "must not contain empty patterns", pattern)
        try:
            compiled = re.compile(pattern)
        except re.error as exc:
            raise SamplingParamsError(
                f"sampling_params.stop_regex: invalid pattern {pattern!r}: {exc}") from None
        _check(compiled.fullmatch("") is None, "stop_regex",
               "must not match the empty string (it would stop at once)", pattern)


def _check_logit_bias(bias: dict[str, float] | None) -> None:
    for key, value in (bias or {}).items():
        _check(str(key).lstrip("-").isdigit() and int(key) >= 0, "logit_bias",
               "keys must be token ids (non-negative integers)", key)
        _check(-100 <= value <= 100, "logit_bias", "values must be in [-100, 100]", value)


def logit_bias_ids(p: SamplingParams) -> dict[int, float]:
    """``logit_bias`` with integer token ids (the wire spelling uses strings, as OpenAI)."""
    return {int(k): float(v) for k, v in (p.logit_bias or {}).items()}


def _check(ok: bool, field: str, rule: str, got: Any) -> None:
    if not ok:
        raise SamplingParamsError(f"sampling_params.{field} {rule}, got {got!r}")
