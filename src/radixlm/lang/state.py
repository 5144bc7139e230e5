"""What a program's ``s`` is: :class:`ProgramState` (one state) and
:class:`ProgramStateGroup` (the branches of ``s.fork(n)``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .errors import ProgramError
from .interpreter import StreamExecutor
from .ir import (
    SglConcateAndAppend,
    SglExpr,
    SglExprList,
    SglRoleBegin,
    SglRoleEnd,
    SglVarScopeBegin,
    SglVarScopeEnd,
    as_expr,
)
from .stream_meta import since


class ProgramState:
    """The state of a running program: append with ``s += expr``, read with ``s["name"]``."""

    def __init__(self, stream_executor: StreamExecutor) -> None:
        self.stream_executor = stream_executor
        self.ret_value: Any = None

    # -- building -------------------------------------------------------------------------

    def __iadd__(self, other: Any) -> ProgramState:
        if other is None:
            raise ValueError("tried to append None to the program state")
        self.stream_executor.submit(as_expr(other))
        return self

    def _role(self, role: str, expr: Any = None) -> Any:
        if expr is not None:
            node = SglExprList([SglRoleBegin(role), as_expr(expr), SglRoleEnd(role)])
            self.stream_executor.submit(node)
            return node

        @contextmanager
        def scope() -> Iterator[None]:
            self.stream_executor.submit(SglRoleBegin(role))
            yield
            self.stream_executor.submit(SglRoleEnd(role))

        return scope()

    def system(self, expr: Any = None) -> Any:
        """``s.system("text")`` appends a system message; ``with s.system():`` opens one."""
        return self._role("system", expr)

    def user(self, expr: Any = None) -> Any:
        return self._role("user", expr)

    def assistant(self, expr: Any = None) -> Any:
        return self._role("assistant", expr)

    @contextmanager
    def var_scope(self, name: str) -> Iterator[None]:
        """Capture everything appended inside the block into variable ``name``."""
        self.stream_executor.submit(SglVarScopeBegin(name))
        yield
        self.stream_executor.submit(SglVarScopeEnd(name))

    def fork(self, size: int = 1, position_ids_offset: list[int] | None = None
             ) -> ProgramStateGroup:
        """``size`` branches that share the text so far (sent once, prefill-only)."""
        executors = self.stream_executor.fork(size)
        return ProgramStateGroup([ProgramState(e) for e in executors], self)

    @contextmanager
    def copy(self, position_ids_offset: list[int] | None = None) -> Iterator[ProgramState]:
        """One branch, joined when the block ends."""
        group = self.fork(1)
        try:
            yield group[0]
        finally:
            group.join()

    # -- reading --------------------------------------------------------------------------

    def text(self) -> str:
        """The whole text so far (waits for queued nodes)."""
        return self.stream_executor.text()

    def messages(self) -> list[dict[str, Any]]:
        """The chat so far in OpenAI format (``{"role", "content"}`` dicts). On a failed
        program it raises :class:`ProgramError` naming the error (``text()`` still gives the
        text that ran before it, as SGLang's does)."""
        return self.stream_executor.messages()

    def sync(self) -> None:
        self.stream_executor.sync()

    def error(self) -> BaseException | None:
        """The error that stopped the program, or ``None``."""
        return self.stream_executor.error()

    def get_var(self, name: str) -> Any:
        return self.stream_executor.get_var(name)

    def set_var(self, name: str, value: Any) -> None:
        self.stream_executor.set_var(name, value)

    def get_meta_info(self, name: str) -> Any:
        """The server's meta info for the gen/select that set ``name`` (``cached_tokens``,
        ``prompt_tokens``, ``finish_reason``, logprobs; for a select, the scores)."""
        return self.stream_executor.get_meta_info(name)

    def cache_stats(self) -> dict[str, Any]:
        """Token accounting over every request this program (and its joined branches) made:
        ``requests``, ``prompt_tokens``, ``cached_tokens``, ``completion_tokens``,
        ``hit_rate`` (cached / prompt)."""
        self.sync()
        usage = self.stream_executor.usage
        prompt = sum(u.prompt_tokens for u in usage)
        cached = sum(u.cached_tokens for u in usage)
        return {"requests": len(usage), "prompt_tokens": prompt, "cached_tokens": cached,
                "completion_tokens": sum(u.completion_tokens for u in usage),
                "hit_rate": cached / prompt if prompt else 0.0}

    def __getitem__(self, name: str) -> Any:
        return self.get_var(name)

    def __setitem__(self, name: str, value: Any) -> None:
        self.set_var(name, value)

    def __contains__(self, name: str) -> bool:
        return name in self.stream_executor.variables

    # -- streaming ------------------------------------------------------------------------

    def text_iter(self, var_name: str | None = None) -> Iterator[str]:
        """Increments of the whole text (or of variable ``var_name``) as they are generated;
        on a state that is not streaming, the final value once."""
        exe = self.stream_executor
        if not exe.stream:
            yield self.text() if var_name is None else self.get_var(var_name)
            return
        for event, read, done in self._stream_sources(var_name):
            prev = 0
            while True:
                event.wait()
                event.clear()
                finished = done()  # before reading: once done, the value read is final
                out = str(read())[prev:]
                prev += len(out)
                if out:
                    yield out
                if finished:
                    break

    async def text_async_iter(self, var_name: str | None = None,
                              return_meta_data: bool = False) -> AsyncIterator[Any]:
        """The asyncio form of :meth:`text_iter`; with ``return_meta_data`` yields
        ``(text, meta_info)`` for a variable."""
        exe = self.stream_executor
        if not exe.stream:
            value = self.text() if var_name is None else self.get_var(var_name)
            yield (value, self.get_meta_info(var_name)) if return_meta_data and var_name \
                else value
            return
        loop = asyncio.get_running_loop()
        given: dict[str, int] = {}  # output logprob entries already yielded
        for event, read, done in self._stream_sources(var_name):
            prev = 0
            while True:
                await loop.run_in_executor(None, event.wait)
                event.clear()
                finished = done()
                out = str(read())[prev:]
                prev += len(out)
                if out:
                    if return_meta_data and var_name is not None:
                        yield out, since(exe.meta_info.get(var_name), given)
                    else:
                        yield out
                if finished:
                    break

    def _stream_sources(self, var_name: str | None
                        ) -> Iterator[tuple[Any, Callable[[], str], Callable[[], bool]]]:
        exe = self.stream_executor
        if var_name is None:
            yield exe.stream_text_event, lambda: exe.text_, lambda: exe.is_finished
            return
        event = exe.stream_var_event.get(var_name)
        if event is None:
            raise KeyError(f"no variable {var_name!r} to stream; it must be the name of a gen "
                           f"appended to this state")
        yield (event, lambda: exe.variables.get(var_name, ""),
               lambda: exe.variable_event[var_name].is_set())

    def __del__(self) -> None:
        exe = getattr(self, "stream_executor", None)
        if exe is not None:
            exe.end()

    def __repr__(self) -> str:
        return f"ProgramState({self.text()!r})"


class ProgramStateGroup:
    """The branches of a fork: ``forks[i]``, ``forks += expr`` (every branch),
    ``forks += [e0, e1, ...]`` (one each), ``forks += lambda i: ...``, then ``join()``."""

    def __init__(self, states: list[ProgramState], src_state: ProgramState | None = None
                 ) -> None:
        self.states = states
        self.src_state = src_state

    def join(self, mode: str = "gather_variable") -> None:
        """Wait for the branches. ``gather_variable``: each variable first set in the branches
        becomes a list in the parent, one value per branch that set it.
        ``concate_and_append``: the branches' new text is appended to the parent (as text:
        no KV splicing)."""
        if mode not in ("gather_variable", "concate_and_append"):
            raise ValueError(f"join(): mode must be 'gather_variable' or 'concate_and_append', "
                             f"got {mode!r}")
        for i, state in enumerate(self.states):
            err = state.error()
            if err is not None:
                raise ProgramError(f"fork branch {i} failed: {type(err).__name__}: {err}"
                                   ) from err
        parent = self.src_state.stream_executor
        if mode == "gather_variable":
            before = set(parent.variables)
            for state in self.states:
                exe = state.stream_executor
                for name in exe.variables.keys() - before:
                    parent.variables.setdefault(name, []).append(exe.variables[name])
        else:
            self.src_state += SglConcateAndAppend(self.states)
            parent.sync()
        for state in self.states:
            parent.usage.extend(state.stream_executor.usage)
            state.stream_executor.end()

    def __getitem__(self, i: int) -> ProgramState:
        return self.states[i]

    def __setitem__(self, i: int, value: ProgramState) -> None:
        if value is not self.states[i]:
            raise TypeError("fork branches cannot be replaced; append to them with "
                            "forks[i] += expr")

    def __len__(self) -> int:
        return len(self.states)

    def __iter__(self) -> Iterator[ProgramState]:
        return iter(self.states)

    def __iadd__(self, other: Any) -> ProgramStateGroup:
        if isinstance(other, (SglExpr, str)):
            items = [other] * len(self.states)
        elif isinstance(other, (list, tuple)):
            if len(other) != len(self.states):
                raise ValueError(f"forks += list: expected {len(self.states)} items (one per "
                                 f"branch), got {len(other)}")
            items = list(other)
        elif callable(other):
            items = [other(i) for i in range(len(self.states))]
        else:
            raise TypeError(f"forks += expects an expression, a list (one per branch) or a "
                            f"function of the branch index, got {type(other).__name__}")
        for state, item in zip(self.states, items):
            state += item
        return self
