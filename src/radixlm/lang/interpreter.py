"""The interpreter: one :class:`StreamExecutor` per running program (and per fork branch).

``s += expr`` queues a node and returns at once; a worker thread executes nodes in order by
calling the backend, so the program's Python keeps going until it reads a variable, and fork
branches (each with its own executor) run concurrently. Each gen or select ships the whole
text so far; the server's radix cache matches the shared prefix.

Failures: an error while executing a node stops the program (later nodes are skipped, waiters
are woken and see a :class:`ProgramError`); an error in the program's own Python cancels the
queued nodes and aborts the request in flight.
"""

from __future__ import annotations

import contextvars
import logging
import queue
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .api_speculation import ChatSpeculation, CompletionSpeculation
from .errors import ProgramError
from .ir import (
    SglCommitLazy,
    SglConcateAndAppend,
    SglConstantText,
    SglExpr,
    SglExprList,
    SglGen,
    SglImage,
    SglRoleBegin,
    SglRoleEnd,
    SglSelect,
    SglVariable,
    SglVarScopeBegin,
    SglVarScopeEnd,
    SglVideo,
)
from .sampling import SglSamplingParams
from .stream_meta import merge_chunk

if TYPE_CHECKING:
    from .backend.base import BaseBackend

logger = logging.getLogger(__name__)

_END = object()  # queue marker: the program has no more nodes


@dataclass
class CallUsage:
    """Token accounting of one server request made by a program."""

    kind: str  # gen, select, prefill
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int


class StreamExecutor:
    """Executes one program's nodes on a worker thread and holds its text and variables."""

    def __init__(self, backend: BaseBackend, arguments: dict[str, Any],
                 default_sampling: SglSamplingParams, chat_template: Any = None,
                 stream: bool = False, num_api_spec_tokens: int | None = None) -> None:
        self.sid = uuid.uuid4().hex
        self.backend = backend
        self.arguments = arguments
        self.default_sampling = default_sampling
        self.stream = stream
        self.num_api_spec_tokens = num_api_spec_tokens
        # Speculation only where the backend offers it (API backends); others ignore N.
        spec = num_api_spec_tokens if getattr(backend, "supports_api_speculation", False) \
            else None
        self._completion_spec = (CompletionSpeculation(spec) if spec is not None
                                 and not backend.is_chat_model else None)
        self._chat_spec = (ChatSpeculation(spec) if spec is not None and backend.is_chat_model
                           else None)
        self._chat_template = chat_template

        self.variables: dict[str, Any] = {}
        self.variable_event: dict[str, threading.Event] = {}
        self.meta_info: dict[str, Any] = {}
        self.usage: list[CallUsage] = []
        self.text_ = ""
        self.messages_: list[dict[str, Any]] = []
        self.cur_role: str | None = None
        self.cur_role_begin_pos: int | None = None
        self.images_: list[tuple[str, str]] = []
        self.cur_images: list[tuple[str, str]] = []
        self.fork_start_text_pos: int | None = None
        self.scope_starts: dict[str, int] = {}
        self.error_: BaseException | None = None
        self.is_finished = False

        self._rid_count = 0
        self._inflight: set[str] = set()
        self._lock = threading.Lock()
        self._cancelled = False
        self._ended = False
        self.stream_text_event = threading.Event() if stream else None
        self.stream_var_event: dict[str, threading.Event] | None = {} if stream else None
        self.queue: queue.Queue[Any] = queue.Queue()
        # The worker sees the caller's context variables (as SGLang does).
        ctx = contextvars.copy_context()
        self.worker = threading.Thread(target=ctx.run, args=(self._work,), daemon=True,
                                       name=f"sgl-program-{self.sid[:8]}")
        self.worker.start()

    # -- public (called from the program's thread) ----------------------------------------

    @property
    def chat_template(self) -> Any:
        if self._chat_template is None:
            self._chat_template = self.backend.get_chat_template()
        return self._chat_template

    def submit(self, expr: SglExpr) -> None:
        if self._ended:
            raise ProgramError("this program state has ended; it accepts no more expressions")
        self._init_var_events(expr)
        self.queue.put(expr)

    def sync(self) -> None:
        """Wait until every queued node has run (or been skipped after an error)."""
        self.queue.join()

    def get_var(self, name: str) -> Any:
        event = self.variable_event.get(name)
        if event is not None:
            event.wait()
        if name in self.variables:
            return self.variables[name]
        if self.error_ is not None:
            raise self._failed(f"variable {name!r} was not set")
        raise KeyError(f"no variable {name!r} in this program state; it has "
                       f"{sorted(self.variables)}")

    def set_var(self, name: str, value: Any) -> None:
        self.variables[name] = value

    def get_meta_info(self, name: str, timeout: float | None = None) -> Any:
        event = self.variable_event.get(name)
        if event is not None and not event.wait(timeout):
            raise TimeoutError(f"timed out waiting for variable {name!r}")
        return self.meta_info.get(name)

    def fork(self, size: int = 1) -> list[StreamExecutor]:
        """``size`` copies of this state; with more than one, the text so far is first sent
        as a prefill-only request so that every branch hits the cache."""
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise ValueError(f"fork(): size must be an int >= 1, got {size!r}")
        if size > 1:
            self.submit(SglCommitLazy())
        self.sync()
        if self.error_ is not None:
            raise ProgramError(f"cannot fork a failed program: {self.error_}") from self.error_
        branches = []
        for _ in range(size):
            exe = StreamExecutor(self.backend, self.arguments, self.default_sampling,
                                 self._chat_template, self.stream)
            exe.variables = dict(self.variables)
            exe.text_ = self.text_
            exe.messages_ = list(self.messages_)
            exe.cur_role, exe.cur_role_begin_pos = self.cur_role, self.cur_role_begin_pos
            exe.fork_start_text_pos = len(self.text_)
            exe.images_ = list(self.images_)
            exe.scope_starts = dict(self.scope_starts)
            branches.append(exe)
        return branches

    def text(self) -> str:
        self.sync()
        return self.text_

    def messages(self) -> list[dict[str, Any]]:
        """The finished messages; a failed program raises its error instead (its chat stops
        before the failing message: read as the program's answer, it would mislead)."""
        self.sync()
        if self.error_ is not None:
            raise self._failed("no messages")
        return self.messages_

    def _failed(self, what: str) -> ProgramError:
        """The error a reader of a failed program's results gets (its cause: the failure)."""
        err = ProgramError(f"{what}: the program failed with {type(self.error_).__name__}: "
                           f"{self.error_}")
        err.__cause__ = self.error_
        return err

    def error(self) -> BaseException | None:
        self.sync()
        return self.error_

    def end(self) -> None:
        """No more nodes will come; the worker exits after the queued ones."""
        if not self._ended:
            self._ended = True
            self.queue.put(_END)
            self.backend.end_program(self)

    def fail(self, error: BaseException) -> None:
        """The program's Python raised: skip queued nodes, abort what is in flight."""
        with self._lock:
            self._cancelled = True
            if self.error_ is None:
                self.error_ = error
            rids = list(self._inflight)
        if rids:
            self.backend.abort(rids)
        self._wake_all()

    # -- request bookkeeping (called by backends) -----------------------------------------

    def new_rid(self) -> str:
        with self._lock:
            self._rid_count += 1
            return f"{self.sid}-{self._rid_count}"

    @contextmanager
    def requests_in_flight(self, rids: list[str]) -> Iterator[None]:
        """Mark ``rids`` as in flight, so that a failing program can abort them."""
        with self._lock:
            if self._cancelled:
                raise ProgramError("the program was cancelled")
            self._inflight.update(rids)
        try:
            yield
        finally:
            with self._lock:
                self._inflight.difference_update(rids)

    def record_usage(self, kind: str, meta_info: dict[str, Any]) -> None:
        self.usage.append(CallUsage(kind, int(meta_info.get("prompt_tokens") or 0),
                                    int(meta_info.get("cached_tokens") or 0),
                                    int(meta_info.get("completion_tokens") or 0)))

    # -- worker ---------------------------------------------------------------------------

    def _work(self) -> None:
        while True:
            expr = self.queue.get()
            try:
                if expr is _END:
                    break
                if self.error_ is None and not self._cancelled:
                    try:
                        self._execute(expr)
                    except BaseException as exc:  # noqa: BLE001 - reported to the program
                        logger.debug("program %s failed", self.sid, exc_info=True)
                        self._record_failure(exc)
            finally:
                self.queue.task_done()
                if self.stream_text_event is not None:
                    self.stream_text_event.set()
        self.is_finished = True
        if self.stream_text_event is not None:
            self.stream_text_event.set()

    def _record_failure(self, exc: BaseException) -> None:
        with self._lock:
            if self.error_ is None:
                self.error_ = exc
        self._wake_all()

    def _wake_all(self) -> None:
        for event in self.variable_event.values():
            event.set()
        for event in (self.stream_var_event or {}).values():
            event.set()
        if self.stream_text_event is not None:
            self.stream_text_event.set()

    def _init_var_events(self, expr: SglExpr) -> None:
        if isinstance(expr, SglExprList):
            for e in expr.expr_list:
                self._init_var_events(e)
        elif isinstance(expr, (SglGen, SglSelect, SglVarScopeBegin)) and expr.name is not None:
            self.variable_event[expr.name] = threading.Event()
            if self.stream_var_event is not None:
                self.stream_var_event[expr.name] = threading.Event()

    def _execute(self, expr: Any) -> None:
        if isinstance(expr, str):
            expr = SglConstantText(expr)
        handler = _HANDLERS.get(type(expr))
        if handler is None:
            raise TypeError(f"cannot execute {expr!r} ({type(expr).__name__})")
        handler(self, expr)

    def _fill(self, expr: SglConstantText) -> None:
        value = str(expr.value)
        if self._chat_spec is not None and self.cur_role == "assistant":
            self._chat_spec.fill(value)  # part of the message answered at the role's end
            return
        if self._completion_spec is not None:
            self._completion_spec.fill(value)
        self.text_ += value

    def _list(self, expr: SglExprList) -> None:
        for e in expr.expr_list:
            self._execute(e)

    def _gen(self, expr: SglGen) -> None:
        params = self.resolve_sampling_params(expr.sampling_params)
        name = expr.name
        if self.stream and (self._chat_spec or self._completion_spec):
            raise ValueError("stream=True cannot run a program with num_api_spec_tokens "
                             "(speculated text arrives whole); drop one of them")
        if self._chat_spec is not None and self.cur_role == "assistant":
            self._chat_spec.gen(name, params)  # answered with the message, at the role's end
            return
        if not self.stream:
            spec = (self._completion_spec.gen(params, self._generate)
                    if self._completion_spec is not None else None)
            comp, meta = spec if spec is not None else self.backend.generate(self, params)
            self.text_ += comp[0] if isinstance(comp, list) else comp
            self._set_var(name, comp, meta)
            return
        if name is not None:
            self.variables[name] = ""
        whole = None
        for delta, meta in self.backend.generate_stream(self, params):
            if name is not None:  # meta before text: a reader that sees the text has its logprobs
                whole = self.meta_info[name] = merge_chunk(whole, meta)
            self.text_ += delta
            if name is not None:
                self.variables[name] += delta
                self.stream_var_event[name].set()
            self.stream_text_event.set()
        if name is not None:
            self.variable_event[name].set()
            self.stream_var_event[name].set()

    def _generate(self, params: SglSamplingParams) -> tuple[Any, Any]:
        return self.backend.generate(self, params)

    def _select(self, expr: SglSelect) -> None:
        if self._completion_spec is not None:
            self._completion_spec.drop()
        decision = self.backend.select(self, expr.choices, expr.temperature,
                                       expr.choices_method)
        self.text_ += decision.decision
        self._set_var(expr.name, decision.decision, decision.meta_info)

    def _set_var(self, name: str | None, value: Any, meta: Any) -> None:
        if name is None:
            return
        self.variables[name] = value
        self.meta_info[name] = meta
        self.variable_event[name].set()
        if self.stream_var_event is not None:
            self.stream_var_event[name].set()

    def _variable(self, expr: SglVariable) -> None:
        source = expr.source
        value = source.get_var(expr.name) if isinstance(source, StreamExecutor) else \
            self.get_var(expr.name)
        self.text_ += str(value)

    def _role_begin(self, expr: SglRoleBegin) -> None:
        if self.cur_role is not None:
            raise ValueError(f"cannot begin a {expr.role!r} role inside the {self.cur_role!r} "
                             f"role: roles do not nest")
        template = self.chat_template
        if not self.messages_ and expr.role != "system" and template.default_system_prompt:
            self._role_begin(SglRoleBegin("system"))
            self.text_ += template.default_system_prompt
            self._role_end(SglRoleEnd("system"))
        self.cur_role = expr.role
        prefix, _ = template.get_prefix_and_suffix(expr.role, self.messages_)
        self.text_ += prefix
        self.cur_role_begin_pos = len(self.text_)

    def _role_end(self, expr: SglRoleEnd) -> None:
        if self.cur_role != expr.role:
            raise ValueError(f"cannot end the {expr.role!r} role: the current role is "
                             f"{self.cur_role!r}")
        if self._chat_spec is not None and expr.role == "assistant":
            terms, meta = self._chat_spec.finish(self._generate)
            for term in terms:
                self.text_ += term.text
                if term.stops is not None:
                    self._set_var(term.name, term.text, meta if term.matched else {
                        "speculative": "the message did not match the program's pattern"})
        content = self.text_[self.cur_role_begin_pos:].lstrip()
        _, suffix = self.chat_template.get_prefix_and_suffix(expr.role, self.messages_)
        self.text_ += suffix
        self.cur_role = None
        if self.cur_images:
            parts: list[dict[str, Any]] = [{"type": "text", "text": content}]
            parts += [{"type": "image_url", "image_url": {"url": f"data:image/jpeg;base64,{b64}"}}
                      for _, b64 in self.cur_images]
            self.messages_.append({"role": expr.role, "content": parts})
            self.cur_images = []
        else:
            self.messages_.append({"role": expr.role, "content": content})

    def _image(self, expr: SglImage | SglVideo) -> None:
        data = self.backend.encode_image(expr)  # raises on text-only models
        self.images_.append((expr.path, data))
        self.cur_images.append((expr.path, data))
        self.text_ += self.chat_template.image_token

    def _scope_begin(self, expr: SglVarScopeBegin) -> None:
        self.scope_starts[expr.name] = len(self.text_)

    def _scope_end(self, expr: SglVarScopeEnd) -> None:
        if expr.name not in self.scope_starts:
            raise ValueError(f"var_scope {expr.name!r} ended but never began")
        value = self.text_[self.scope_starts.pop(expr.name):]
        self.variables[expr.name] = value
        if expr.name in self.variable_event:
            self.variable_event[expr.name].set()
        if self.stream_var_event is not None and expr.name in self.stream_var_event:
            self.stream_var_event[expr.name].set()

    def _commit(self, expr: SglCommitLazy) -> None:
        if self.text_:  # forking before any text is a no-op (cf. sglang#2755)
            self.backend.commit_lazy_operations(self)

    def _concat_append(self, expr: SglConcateAndAppend) -> None:
        # No server can splice KV caches here: the branches' new text is appended as text,
        # and its KV is recomputed (or reused from the cache) by the next request.
        for state in expr.states:
            exe = state.stream_executor
            exe.sync()
            self.text_ += exe.text_[exe.fork_start_text_pos:]

    def resolve_sampling_params(self, override: SglSamplingParams) -> SglSamplingParams:
        """Program defaults, replaced field by field by the gen's own values, plus the chat
        template's stop strings."""
        params = self.default_sampling.merged(override)
        stop_str = getattr(self.chat_template, "stop_str", ())
        if stop_str:
            params.stop = params.stop_list() + [s for s in stop_str
                                                if s not in params.stop_list()]
        return params


_HANDLERS = {
    SglConstantText: StreamExecutor._fill,
    SglExprList: StreamExecutor._list,
    SglGen: StreamExecutor._gen,
    SglSelect: StreamExecutor._select,
    SglVariable: StreamExecutor._variable,
    SglRoleBegin: StreamExecutor._role_begin,
    SglRoleEnd: StreamExecutor._role_end,
    SglImage: StreamExecutor._image,
    SglVideo: StreamExecutor._image,
    SglVarScopeBegin: StreamExecutor._scope_begin,
    SglVarScopeEnd: StreamExecutor._scope_end,
    SglCommitLazy: StreamExecutor._commit,
    SglConcateAndAppend: StreamExecutor._concat_append,
}

