"""Running programs: one (``run``), many (``run_batch``), and warming the cache for a batch."""

from __future__ import annotations

import logging
import os
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from .backend.resolve import as_backend
from .global_config import global_config
from .interpreter import StreamExecutor
from .sampling import SglSamplingParams
from .state import ProgramState

if TYPE_CHECKING:
    from .function import SglFunction

logger = logging.getLogger(__name__)


def _start(program: SglFunction, backend: Any, kwargs: dict[str, Any],
           defaults: SglSamplingParams, stream: bool) -> ProgramState:
    executor = StreamExecutor(as_backend(backend), kwargs, defaults, stream=stream,
                              num_api_spec_tokens=program.num_api_spec_tokens)
    return ProgramState(executor)


def _body(program: SglFunction, state: ProgramState, args: tuple, kwargs: dict[str, Any]
          ) -> None:
    """Run the program's Python; on an exception cancel its requests, then re-raise."""
    try:
        state.ret_value = program.func(state, *args, **kwargs)
    except BaseException as exc:
        state.stream_executor.fail(exc)
        raise
    finally:
        state.stream_executor.end()
    if global_config.verbosity >= 2:
        print(state.text())


def run_program(program: SglFunction, backend: Any, args: tuple, kwargs: dict[str, Any],
                defaults: SglSamplingParams, stream: bool = False, sync: bool = False
                ) -> ProgramState:
    """Run ``program`` once. Without ``stream`` the body runs here (its exceptions propagate);
    with ``stream`` it runs on another thread and the state is returned at once."""
    kwargs = {**kwargs, **program.bind_arguments}
    state = _start(program, backend, kwargs, defaults, stream)
    if stream:
        def body() -> None:
            try:
                _body(program, state, args, kwargs)
            except BaseException:  # noqa: BLE001 - kept in the state (state.error())
                logger.debug("streamed program failed", exc_info=True)

        threading.Thread(target=body, daemon=True, name="sgl-program-body").start()
        return state
    _body(program, state, args, kwargs)
    if sync:
        state.sync()
    return state


def _run_isolated(program: SglFunction, backend: Any, kwargs: dict[str, Any],
                  defaults: SglSamplingParams) -> ProgramState:
    # A program that raises keeps its error in its state; the batch carries on.
    kwargs = {**kwargs, **program.bind_arguments}
    state = _start(program, backend, kwargs, defaults, stream=False)
    try:
        _body(program, state, (), kwargs)
    except Exception:  # noqa: BLE001 - reported through state.error()
        logger.debug("a program of the batch failed", exc_info=True)
    state.sync()
    return state


def resolve_num_threads(num_threads: int | str, batch_size: int) -> int:
    """``"auto"`` is max(96, 16 x CPUs), SGLang's choice; capped at the batch size."""
    if num_threads == "auto":
        num_threads = max(96, 16 * (os.cpu_count() or 1))
    if isinstance(num_threads, bool) or not isinstance(num_threads, int) or num_threads < 1:
        raise ValueError(f"run_batch(): num_threads must be 'auto' or an int >= 1, got "
                         f"{num_threads!r}")
    return max(1, min(num_threads, batch_size))


def run_program_batch(program: SglFunction, backend: Any, batch_kwargs: list[dict[str, Any]],
                      defaults: SglSamplingParams, num_threads: int | str,
                      progress_bar: bool) -> list[ProgramState]:
    """Run ``program`` once per argument dict; states come back in input order. A program
    that fails is returned with its error in ``state.error()``; the others are unaffected."""
    backend = as_backend(backend)
    threads = resolve_num_threads(num_threads, len(batch_kwargs))
    if global_config.enable_precache_with_tracing and len(batch_kwargs) > 1:
        cache_program(program, backend)
    bar = None
    if progress_bar:
        import tqdm

        bar = tqdm.tqdm(total=len(batch_kwargs))
    try:
        if threads == 1:
            states = []
            for kwargs in batch_kwargs:
                states.append(_run_isolated(program, backend, kwargs, defaults))
                if bar is not None:
                    bar.update()
            return states
        with ThreadPoolExecutor(threads, thread_name_prefix="sgl-batch") as pool:
            futures = [pool.submit(_run_isolated, program, backend, kw, defaults)
                       for kw in batch_kwargs]
            if bar is not None:
                for f in futures:
                    f.add_done_callback(lambda _: bar.update())
            return [f.result() for f in futures]
    finally:
        if bar is not None:
            bar.close()


def cache_program(program: SglFunction, backend: Any) -> str:
    """Trace ``program`` with placeholder arguments and prefill the constant text it starts
    with, if longer than ``global_config.precache_min_chars``; returns that text."""
    from .tracer import extract_prefix_by_tracing

    backend = as_backend(backend)
    prefix = extract_prefix_by_tracing(program, backend)
    if len(prefix) > global_config.precache_min_chars:
        backend.cache_prefix(prefix)
    return prefix
