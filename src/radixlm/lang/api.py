"""The public functions of the language (SGLang's names, signatures and defaults)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .choices import ChoicesSamplingMethod, token_length_normalized
from .function import SglFunction
from .global_config import global_config
from .ir import (
    SglExpr,
    SglExprList,
    SglGen,
    SglImage,
    SglRoleBegin,
    SglRoleEnd,
    SglSelect,
    SglVideo,
    as_expr,
)
from .sampling import SglSamplingParams, check_sampling_args, json_schema_string


def function(func: Callable[..., Any] | None = None, num_api_spec_tokens: int | None = None
             ) -> Any:
    """Decorator: ``@function`` or ``@function(num_api_spec_tokens=N)``.

    ``num_api_spec_tokens`` (API speculative execution) is accepted; it only matters for API
    backends, which radixlm does not ship, and is ignored by ours."""
    if func is not None:
        return SglFunction(func, num_api_spec_tokens=num_api_spec_tokens)
    return lambda f: SglFunction(f, num_api_spec_tokens=num_api_spec_tokens)


def set_default_backend(backend: Any) -> None:
    """The backend programs run on when ``run`` is given none: a RuntimeEndpoint, a Runtime,
    an Engine (radixlm's, used in-process) or any BaseBackend.

    The object itself is kept (as SGLang does): ``global_config.default_backend.endpoint``
    still reaches a Runtime's endpoint; programs resolve it to a backend when they run."""
    from .backend.resolve import as_backend

    as_backend(backend)  # refuse what cannot serve programs now, not at the first run
    global_config.default_backend = backend


def _backend_or_default(backend: Any) -> Any:
    from .backend.resolve import as_backend

    backend = backend or global_config.default_backend
    return None if backend is None else as_backend(backend)


def flush_cache(backend: Any = None) -> bool:
    """Drop the server's prefix cache; False if refused (requests in flight) or no backend."""
    b = _backend_or_default(backend)
    return False if b is None else b.flush_cache()


def get_server_info(backend: Any = None) -> dict[str, Any] | None:
    """The server's info (arguments, counters such as ``cache_hit_rate``)."""
    b = _backend_or_default(backend)
    return None if b is None else b.get_server_info()


def gen(
    name: str | None = None,
    max_tokens: int | None = None,
    min_tokens: int | None = None,
    n: int | None = None,
    stop: str | list[str] | None = None,
    stop_token_ids: list[int] | None = None,
    stop_regex: str | list[str] | None = None,
    temperature: float | None = None,
    top_p: float | None = None,
    top_k: int | None = None,
    min_p: float | None = None,
    frequency_penalty: float | None = None,
    presence_penalty: float | None = None,
    ignore_eos: bool | None = None,
    return_logprob: bool | None = None,
    logprob_start_len: int | None = None,
    top_logprobs_num: int | None = None,
    return_text_in_logprobs: bool | None = None,
    dtype: type | str | None = None,
    choices: list[str] | None = None,
    choices_method: ChoicesSamplingMethod | None = None,
    regex: str | None = None,
    json_schema: Any = None,
    ebnf: str | None = None,
    tools: list[dict[str, Any]] | None = None,
    tool_choice: Any = None,
    close_within_max_tokens: bool | None = None,
) -> SglExpr:
    """Generate text and store it as ``s[name]``. Unset arguments inherit the program's
    defaults. ``dtype`` (int, float, str, bool), ``regex``, ``json_schema`` (a JSON string,
    a dict or a Pydantic model class) and ``ebnf`` (GBNF grammar text, start rule ``root``)
    constrain the output; ``choices`` makes this a select. A constrained output is closed
    within ``max_tokens`` (a complete, valid instance) unless ``close_within_max_tokens`` is
    False (then it is cut at the limit).

    ``tools`` (OpenAI function tools) with ``tool_choice`` "required" (the default), a named
    function (``{"type": "function", "function": {"name": ...}}``) or "auto" constrain the
    output to Hermes-style ``<tool_call>`` calls whose arguments match the tools' schemas;
    the parsed calls are in ``s.get_meta_info(name)["tool_calls"]`` (``name`` and
    ``arguments``, a dict). Put the tools in the prompt with :func:`tools_prompt`."""
    _check_name("gen", name)
    if choices is not None:
        return select(name, choices, 0.0 if temperature is None else temperature,
                      choices_method or token_length_normalized)
    if choices_method is not None:
        raise ValueError("gen(): choices_method needs choices")
    check_sampling_args("gen", dict(
        max_tokens=max_tokens, min_tokens=min_tokens, n=n, stop=stop,
        stop_token_ids=stop_token_ids, stop_regex=stop_regex, temperature=temperature,
        top_p=top_p, top_k=top_k, min_p=min_p, frequency_penalty=frequency_penalty,
        presence_penalty=presence_penalty, ignore_eos=ignore_eos,
        return_logprob=return_logprob, logprob_start_len=logprob_start_len,
        top_logprobs_num=top_logprobs_num, return_text_in_logprobs=return_text_in_logprobs,
        dtype=dtype, regex=regex, ebnf=ebnf, close_within_max_tokens=close_within_max_tokens))
    if tool_choice is not None and tools is None:
        raise ValueError("gen(): tool_choice needs tools")
    params = SglSamplingParams(
        max_new_tokens=max_tokens, min_new_tokens=min_tokens, n=n, stop=stop,
        stop_token_ids=stop_token_ids, stop_regex=stop_regex, temperature=temperature,
        top_p=top_p, top_k=top_k, min_p=min_p, frequency_penalty=frequency_penalty,
        presence_penalty=presence_penalty, ignore_eos=ignore_eos,
        return_logprob=return_logprob, logprob_start_len=logprob_start_len,
        top_logprobs_num=top_logprobs_num, return_text_in_logprobs=return_text_in_logprobs,
        dtype=dtype, regex=regex, json_schema=json_schema_string("gen", json_schema),
        ebnf=ebnf, tools=tools, tool_choice=tool_choice or ("required" if tools else None),
        close_within_max_tokens=close_within_max_tokens)
    return SglGen(name, params)


def gen_int(name: str | None = None, max_tokens: int | None = None, n: int | None = None,
            stop: str | list[str] | None = None, stop_token_ids: list[int] | None = None,
            stop_regex: str | list[str] | None = None, temperature: float | None = None,
            top_p: float | None = None, top_k: int | None = None, min_p: float | None = None,
            frequency_penalty: float | None = None, presence_penalty: float | None = None,
            ignore_eos: bool | None = None, return_logprob: bool | None = None,
            logprob_start_len: int | None = None, top_logprobs_num: int | None = None,
            return_text_in_logprobs: bool | None = None,
            min_tokens: int | None = None) -> SglExpr:
    """``gen(..., dtype=int)``."""
    return gen(name, max_tokens, min_tokens, n, stop, stop_token_ids, stop_regex, temperature,
               top_p, top_k, min_p, frequency_penalty, presence_penalty, ignore_eos,
               return_logprob, logprob_start_len, top_logprobs_num, return_text_in_logprobs,
               dtype=int)


def gen_string(name: str | None = None, max_tokens: int | None = None, n: int | None = None,
               stop: str | list[str] | None = None, stop_token_ids: list[int] | None = None,
               stop_regex: str | list[str] | None = None, temperature: float | None = None,
               top_p: float | None = None, top_k: int | None = None,
               min_p: float | None = None, frequency_penalty: float | None = None,
               presence_penalty: float | None = None, ignore_eos: bool | None = None,
               return_logprob: bool | None = None, logprob_start_len: int | None = None,
               top_logprobs_num: int | None = None,
               return_text_in_logprobs: bool | None = None,
            min_tokens: int | None = None) -> SglExpr:
    """``gen(..., dtype=str)``."""
    return gen(name, max_tokens, min_tokens, n, stop, stop_token_ids, stop_regex, temperature,
               top_p, top_k, min_p, frequency_penalty, presence_penalty, ignore_eos,
               return_logprob, logprob_start_len, top_logprobs_num, return_text_in_logprobs,
               dtype=str)


def select(name: str | None = None, choices: list[str] | None = None,
           temperature: float = 0.0,
           choices_method: ChoicesSamplingMethod = token_length_normalized) -> SglExpr:
    """Append the choice the model scores highest and store it as ``s[name]``.

    All choices are scored in one batched request against the cached prefix; see
    :mod:`radixlm.lang.choices` for the methods."""
    _check_name("select", name)
    if not isinstance(choices, (list, tuple)) or not choices or not all(
            isinstance(c, str) and c for c in choices):
        raise ValueError(f"select(): choices must be a non-empty list of non-empty strings, "
                         f"got {choices!r}")
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or \
            temperature > 1e-5 or temperature < 0:
        raise ValueError(f"select(): temperature must be 0 (choices are scored, not "
                         f"sampled), got {temperature!r}")
    if not isinstance(choices_method, ChoicesSamplingMethod):
        raise ValueError(f"select(): choices_method must be a choices method such as "
                         f"token_length_normalized, got {choices_method!r}")
    return SglSelect(name, list(choices), float(temperature), choices_method)


def _check_name(where: str, name: Any) -> None:
    if name is not None and not isinstance(name, str):
        raise ValueError(f"{where}(): name must be a string, got {name!r} "
                         f"({type(name).__name__})")


def image(expr: str) -> SglExpr:
    """An image for a vision-language model (text-only models refuse it when it runs)."""
    if not isinstance(expr, str):
        raise ValueError(f"image(): expected a file path, got {type(expr).__name__}")
    return SglImage(expr)


def video(path: str, num_frames: int) -> SglExpr:
    """A video for a vision-language model (text-only models refuse it when it runs)."""
    return SglVideo(path, num_frames)


def _role(role: str, expr: Any = None) -> SglExprList:
    if expr is None:
        return SglExprList([SglRoleBegin(role), SglRoleEnd(role)])
    return SglExprList([SglRoleBegin(role), as_expr(expr), SglRoleEnd(role)])


def system(expr: Any = None) -> SglExprList:
    """A system message around ``expr`` (formatted by the model's chat template)."""
    return _role("system", expr)


def user(expr: Any = None) -> SglExprList:
    """A user message around ``expr``."""
    return _role("user", expr)


def assistant(expr: Any = None) -> SglExprList:
    """An assistant message around ``expr`` (usually a gen)."""
    return _role("assistant", expr)


def system_begin() -> SglExpr:
    return SglRoleBegin("system")


def system_end() -> SglExpr:
    return SglRoleEnd("system")


def user_begin() -> SglExpr:
    return SglRoleBegin("user")


def user_end() -> SglExpr:
    return SglRoleEnd("user")


def assistant_begin() -> SglExpr:
    return SglRoleBegin("assistant")


def assistant_end() -> SglExpr:
    return SglRoleEnd("assistant")


def Runtime(*args: Any, **kwargs: Any) -> Any:  # noqa: N802 - SGLang's name
    """Start a radixlm server as a child process; see :class:`radixlm.lang.backend.runtime.
    Runtime`."""
    from .backend.runtime import Runtime as _Runtime

    return _Runtime(*args, **kwargs)


def _not_shipped(name: str) -> Callable[..., Any]:
    def backend(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"the {name} backend is not part of radixlm; use "
                                  f"RuntimeEndpoint (any SGLang-compatible server), Runtime or "
                                  f"Engine")
    backend.__name__ = name
    return backend


def OpenAI(model_name: str, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - SGLang's name
    """A backend over any OpenAI-compatible server (``base_url=``, ``api_key=``); see
    :mod:`radixlm.lang.backend.openai_backend`."""
    from .backend.openai_backend import OpenAI as backend

    return backend(model_name, *args, **kwargs)


Anthropic = _not_shipped("Anthropic")
LiteLLM = _not_shipped("LiteLLM")
VertexAI = _not_shipped("VertexAI")
