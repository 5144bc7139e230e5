"""``@function``: a Python function over a program state ``s``, runnable on a backend."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from .global_config import global_config
from .sampling import program_defaults

# The sampling defaults run() and run_batch() take (SGLang's program-level defaults).


class SglFunction:
    """The object ``@function`` returns. Calling it runs the program (or traces it inside a
    tracing scope); see :meth:`run` and :meth:`run_batch`."""

    def __init__(self, func: Callable[..., Any], num_api_spec_tokens: int | None = None,
                 bind_arguments: dict[str, Any] | None = None) -> None:
        if not callable(func):
            raise TypeError(f"@function expects a function, got {type(func).__name__}")
        self.func = func
        self.num_api_spec_tokens = num_api_spec_tokens
        self.bind_arguments = dict(bind_arguments or {})
        self.signature = inspect.signature(func)
        params = list(self.signature.parameters.values())
        if not params or params[0].name != "s":
            first = params[0].name if params else "nothing"
            raise TypeError(f"@function {func.__name__}: the first parameter must be called "
                            f"'s' (the program state), got {first}")
        self.arg_names = [p.name for p in params[1:]]
        self.arg_defaults = [p.default for p in params[1:]
                             if p.default is not inspect.Parameter.empty]
        self.__name__ = getattr(func, "__name__", "program")
        self.__doc__ = func.__doc__

    def __repr__(self) -> str:
        return f"SglFunction({self.__name__})"

    def bind(self, **kwargs: Any) -> SglFunction:
        """A copy with some arguments fixed."""
        unknown = sorted(set(kwargs) - set(self.arg_names))
        if unknown:
            raise TypeError(f"{self.__name__}.bind(): unknown argument(s) {unknown}; the "
                            f"program takes {self.arg_names}")
        return SglFunction(self.func, self.num_api_spec_tokens,
                           {**self.bind_arguments, **kwargs})

    def _check_args(self, where: str, args: tuple, kwargs: dict[str, Any]) -> None:
        try:
            self.signature.bind(None, *args, **{**kwargs, **self.bind_arguments})
        except TypeError as exc:
            raise TypeError(f"{self.__name__}.{where}(): {exc}; the program takes "
                            f"{self.arg_names}") from None

    def run(self, *args: Any, max_new_tokens: int = 128, stop: str | list[str] | None = None,
            stop_token_ids: list[int] | None = None, temperature: float = 1.0,
            top_p: float = 1.0, top_k: int = -1, min_p: float = 0.0,
            frequency_penalty: float | None = None, presence_penalty: float | None = None,
            ignore_eos: bool | None = None, return_logprob: bool | None = None,
            logprob_start_len: int | None = None, top_logprobs_num: int | None = None,
            return_text_in_logprobs: bool | None = None, stream: bool = False,
            backend: Any = None, **kwargs: Any) -> Any:
        """Run once with the program's arguments (positional or by name); the keyword
        arguments above are the sampling defaults of every gen. Returns the ProgramState."""
        from .runner import run_program

        defaults = program_defaults(
            max_new_tokens=max_new_tokens, stop=stop, stop_token_ids=stop_token_ids,
            temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
            frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
            ignore_eos=ignore_eos, return_logprob=return_logprob,
            logprob_start_len=logprob_start_len, top_logprobs_num=top_logprobs_num,
            return_text_in_logprobs=return_text_in_logprobs)
        self._check_args("run", args, kwargs)
        return run_program(self, backend or global_config.default_backend, args, kwargs,
                           defaults, stream)

    def run_batch(self, batch_kwargs: list[dict[str, Any]] | list[tuple], *,
                  max_new_tokens: int = 128, stop: str | list[str] | None = None,
                  stop_token_ids: list[int] | None = None, temperature: float = 1.0,
                  top_p: float = 1.0, top_k: int = -1, min_p: float = 0.0,
                  frequency_penalty: float | None = None,
                  presence_penalty: float | None = None, ignore_eos: bool | None = None,
                  return_logprob: bool | None = None, logprob_start_len: int | None = None,
                  top_logprobs_num: int | None = None,
                  return_text_in_logprobs: bool | None = None, backend: Any = None,
                  num_threads: int | str = "auto", progress_bar: bool = False) -> list[Any]:
        """Run once per item (a dict of keyword arguments or a tuple of positional ones),
        concurrently on ``num_threads`` threads; states come back in input order. A program
        that raises does not stop the others: its state holds the error (``state.error()``)."""
        from .runner import run_program_batch

        if not isinstance(batch_kwargs, (list, tuple)):
            raise TypeError(f"{self.__name__}.run_batch(): batch_kwargs must be a list of "
                            f"dicts or tuples, got {type(batch_kwargs).__name__}")
        if not batch_kwargs:
            return []
        items = [self._as_kwargs(i, item) for i, item in enumerate(batch_kwargs)]
        defaults = program_defaults(
            max_new_tokens=max_new_tokens, stop=stop, stop_token_ids=stop_token_ids,
            temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p,
            frequency_penalty=frequency_penalty, presence_penalty=presence_penalty,
            ignore_eos=ignore_eos, return_logprob=return_logprob,
            logprob_start_len=logprob_start_len, top_logprobs_num=top_logprobs_num,
            return_text_in_logprobs=return_text_in_logprobs)
        return run_program_batch(self, backend or global_config.default_backend, items,
                                 defaults, num_threads, progress_bar)

    def _as_kwargs(self, index: int, item: Any) -> dict[str, Any]:
        if isinstance(item, dict):
            self._check_args(f"run_batch item {index}: run", (), item)
            return dict(item)
        if isinstance(item, (list, tuple)):
            self._check_args(f"run_batch item {index}: run", tuple(item), {})
            return dict(zip(self.arg_names, item))
        raise TypeError(f"{self.__name__}.run_batch(): item {index} must be a dict or a "
                        f"tuple of arguments, got {type(item).__name__}")

    def trace(self, *, backend: Any = None, **kwargs: Any) -> Any:
        """Run the program on placeholders and return the tracer (its IR graph)."""
        from .tracer import trace_program

        return trace_program(self, kwargs, backend or global_config.default_backend)

    def cache(self, backend: Any = None) -> str:
        """Prefill the constant text the program starts with; returns that text."""
        from .runner import cache_program

        return cache_program(self, backend or global_config.default_backend)

    def compile(self, *, backend: Any = None) -> Any:
        raise NotImplementedError("compile() (SGLang's dataflow compiler, removed upstream) is "
                                  "not provided; run() and run_batch() reuse work through the "
                                  "radix cache")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from .tracer import current_tracing_scope

        scope = current_tracing_scope()
        if scope is None:
            return self.run(*args, **kwargs)
        kwargs.update(zip(self.arg_names, args))
        # Sampling keywords (temperature=...) do not exist while tracing: keep the arguments.
        arguments = {k: v for k, v in kwargs.items() if k in self.arg_names}
        return self.trace(backend=scope.tracer_state.backend, **arguments)

