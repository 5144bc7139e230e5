"""Sampling parameters of a program: gen-level overrides, program defaults, and the request
fields they become.

Every ``gen`` field defaults to ``None`` = inherit from the program's defaults (the keyword
arguments of ``run``/``run_batch``); resolution is field by field. ``dtype`` becomes a regex
(plus stop strings) on the backend side, as in SGLang.
"""

from __future__ import annotations

import dataclasses
import json
import re
import warnings
from dataclasses import dataclass
from typing import Any

REGEX_INT = r"[-+]?[0-9]+[ \n]*"
REGEX_FLOAT = r"[-+]?[0-9]*\.?[0-9]+[ \n]*"
REGEX_BOOL = r"(True|False)"
REGEX_STR = r"\"[\w\d\s]*\""  # deliberately narrow (no punctuation inside), as in SGLang

# dtype -> (regex, extra stop strings)
DTYPE_REGEX: dict[str, tuple[str, tuple[str, ...]]] = {
    "int": (REGEX_INT, (" ", "\n")),
    "float": (REGEX_FLOAT, (" ", "\n")),
    "bool": (REGEX_BOOL, ()),
    "str": (REGEX_STR, ()),
}

# Fields sent inside ``sampling_params`` (SGLang names).
SAMPLING_FIELDS = (
    "max_new_tokens", "min_new_tokens", "n", "stop", "stop_token_ids", "stop_regex",
    "temperature", "top_p", "top_k", "min_p", "frequency_penalty", "presence_penalty",
    "ignore_eos", "regex", "json_schema", "ebnf", "structural_tag", "close_within_max_tokens",
)
# Fields sent at the top level of a ``/generate`` body.
REQUEST_FIELDS = ("return_logprob", "logprob_start_len", "top_logprobs_num",
                  "return_text_in_logprobs")


@dataclass
class SglSamplingParams:
    """All optional: ``None`` means "inherit" (gen level) or "server default" (program level)."""

    max_new_tokens: int | None = None
    min_new_tokens: int | None = None
    n: int | None = None
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    stop_regex: str | list[str] | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    min_p: float | None = None
    frequency_penalty: float | None = None
    presence_penalty: float | None = None
    ignore_eos: bool | None = None
    return_logprob: bool | None = None
    logprob_start_len: int | None = None
    top_logprobs_num: int | None = None
    return_text_in_logprobs: bool | None = None
    dtype: type | str | None = None
    regex: str | None = None
    json_schema: str | None = None
    ebnf: str | None = None
    structural_tag: str | None = None  # set by the backend from ``tools``
    tools: list[dict[str, Any]] | None = None  # OpenAI-style function tools
    tool_choice: Any = None  # "auto" | "required" | {"type": "function", "function": ...}
    # a constrained output is closed within max_new_tokens (the server's default: True)
    close_within_max_tokens: bool | None = None

    def clone(self) -> SglSamplingParams:
        return dataclasses.replace(self, stop=_copy_list(self.stop),
                                   stop_token_ids=_copy_list(self.stop_token_ids))

    def merged(self, override: SglSamplingParams) -> SglSamplingParams:
        """These defaults with every non-``None`` field of ``override`` replacing its own."""
        out = self.clone()
        for f in dataclasses.fields(override):
            value = getattr(override, f.name)
            if value is not None:
                setattr(out, f.name, _copy_list(value))
        return out

    def stop_list(self) -> list[str]:
        if self.stop is None:
            return []
        return [self.stop] if isinstance(self.stop, str) else list(self.stop)

    def with_dtype_applied(self) -> SglSamplingParams:
        """``dtype`` turned into ``regex`` and stop strings (the dtype wins over a regex)."""
        if self.dtype is None:
            return self
        regex, stops = DTYPE_REGEX[dtype_name(self.dtype, "dtype")]
        if self.regex is not None and self.regex != regex:
            warnings.warn(f"both dtype={dtype_name(self.dtype, 'dtype')} and regex are set; "
                          f"the dtype's regex is used", stacklevel=2)
        out = self.clone()
        out.regex, out.dtype = regex, None
        out.stop = out.stop_list() + [s for s in stops if s not in out.stop_list()]
        return out

    def to_request(self, skip_special_tokens: bool = True,
                   spaces_between_special_tokens: bool = True) -> dict[str, Any]:
        """The ``/generate`` body fields: ``sampling_params`` plus the top-level logprob flags.
        Unset fields are left out so the server's defaults apply."""
        params: dict[str, Any] = {"skip_special_tokens": skip_special_tokens,
                                  "spaces_between_special_tokens": spaces_between_special_tokens}
        for name in SAMPLING_FIELDS:
            value = getattr(self, name)
            if value is None or (isinstance(value, (list, tuple)) and not value):
                continue
            params[name] = list(value) if isinstance(value, tuple) else value
        body: dict[str, Any] = {"sampling_params": params}
        for name in REQUEST_FIELDS:
            if getattr(self, name) is not None:
                body[name] = getattr(self, name)
        return body


def _copy_list(value: Any) -> Any:
    return list(value) if isinstance(value, (list, tuple)) else value


def program_defaults(**values: Any) -> SglSamplingParams:
    """The defaults of ``run``/``run_batch``, validated with the names the caller used."""
    check_sampling_args("run", values)
    return SglSamplingParams(**values)


# -- validation: errors name the argument, what was expected and what came ----------------

_INT_ARGS = {"max_new_tokens", "max_tokens", "min_new_tokens", "min_tokens", "n", "top_k",
             "logprob_start_len", "top_logprobs_num"}
_FLOAT_ARGS = {"temperature", "top_p", "min_p", "frequency_penalty", "presence_penalty"}
_BOOL_ARGS = {"ignore_eos", "return_logprob", "return_text_in_logprobs",
              "close_within_max_tokens"}
_NON_NEGATIVE = {"max_new_tokens", "max_tokens", "min_new_tokens", "min_tokens",
                 "top_logprobs_num", "temperature"}


def _fail(where: str, name: str, expected: str, got: Any) -> None:
    raise ValueError(f"{where}(): {name} must be {expected}, got {got!r} "
                     f"({type(got).__name__})")


def check_sampling_args(where: str, args: dict[str, Any]) -> None:
    """Validate sampling arguments of ``where`` (``gen``, ``run``, ...); ``None`` is allowed."""
    for name, value in args.items():
        if value is None:
            continue
        if name in _INT_ARGS:
            if isinstance(value, bool) or not isinstance(value, int):
                _fail(where, name, "an int", value)
            if name in _NON_NEGATIVE and value < 0:
                _fail(where, name, ">= 0", value)
        elif name in _FLOAT_ARGS:
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                _fail(where, name, "a number", value)
            if name in _NON_NEGATIVE and value < 0:
                _fail(where, name, ">= 0", value)
        elif name in _BOOL_ARGS and not isinstance(value, bool):
            _fail(where, name, "a bool", value)
        elif name in ("stop", "stop_regex") and not _is_str_or_strs(value):
            _fail(where, name, "a string or a list of strings", value)
        elif name == "stop_token_ids" and not (
                isinstance(value, (list, tuple)) and all(
                    isinstance(t, int) and not isinstance(t, bool) for t in value)):
            _fail(where, name, "a list of ints", value)
        elif name == "regex":
            check_regex(where, value)
        elif name == "ebnf" and not (isinstance(value, str) and value.strip()):
            _fail(where, name, "grammar text (a non-empty string)", value)
        elif name == "dtype":
            dtype_name(value, f"{where}(): dtype")


def _is_str_or_strs(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, (list, tuple))
                                      and all(isinstance(s, str) for s in value))


def check_regex(where: str, regex: Any) -> None:
    if not isinstance(regex, str):
        _fail(where, "regex", "a string", regex)
    try:
        re.compile(regex)
    except re.error as exc:
        raise ValueError(f"{where}(): regex {regex!r} is not a valid regular expression: "
                         f"{exc}") from None


def dtype_name(dtype: Any, what: str = "dtype") -> str:
    """``int``/``float``/``str``/``bool`` (the type or its name) as a name."""
    name = dtype if isinstance(dtype, str) else getattr(dtype, "__name__", None)
    if name not in DTYPE_REGEX:
        raise ValueError(f"{what} must be one of int, float, str, bool (the type or its "
                         f"name), got {dtype!r}")
    return name


def json_schema_string(where: str, schema: Any) -> str | None:
    """A JSON Schema given as a string, a dict or a Pydantic model class, as a JSON string."""
    if schema is None:
        return None
    if isinstance(schema, str):
        try:
            json.loads(schema)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{where}(): json_schema is not valid JSON: {exc}") from None
        return schema
    if isinstance(schema, dict):
        return json.dumps(schema)
    to_schema = getattr(schema, "model_json_schema", None)
    if callable(to_schema):
        return json.dumps(to_schema())
    raise ValueError(f"{where}(): json_schema must be a JSON string, a dict or a Pydantic "
                     f"model class, got {schema!r} ({type(schema).__name__})")
