"""Tracing: run a program's Python on placeholder arguments and record its nodes instead of
executing them.

``run_batch`` uses it to find the constant text every program of the batch starts with (and
prefill it once); ``SglFunction.trace()`` returns the recorded graph. Formatting a placeholder
(an f-string over an argument) raises ``TypeError``: it would bake the placeholder into text.
"""

from __future__ import annotations

import contextvars
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from .backend.base import BaseBackend
from .backend.resolve import as_backend
from .ir import (
    SglArgument,
    SglConstantText,
    SglExpr,
    SglExprList,
    SglFork,
    SglGen,
    SglGetForkItem,
    SglRoleBegin,
    SglRoleEnd,
    SglSelect,
    SglVariable,
    SglVarScopeBegin,
    SglVarScopeEnd,
    as_expr,
)
from .state import ProgramState, ProgramStateGroup

if TYPE_CHECKING:
    from .function import SglFunction


class StopTracing(Exception):
    """Raised inside a prefix-only trace at the first node that is not constant text."""


_scope: contextvars.ContextVar[TracingScope | None] = contextvars.ContextVar(
    "sgl_tracing_scope", default=None)


class TracingScope:
    """While active, calling an ``@function`` traces it instead of running it."""

    def __init__(self, tracer_state: TracerProgramState) -> None:
        self.tracer_state = tracer_state
        self._token: contextvars.Token | None = None

    def __enter__(self) -> TracingScope:
        self._token = _scope.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _scope.reset(self._token)


def current_tracing_scope() -> TracingScope | None:
    return _scope.get()


def _tracing_backend(backend: Any) -> BaseBackend:
    return BaseBackend() if backend is None else as_backend(backend)


def extract_prefix_by_tracing(program: SglFunction, backend: Any) -> str:
    """The constant text the program appends before its first argument, gen or fork."""
    arguments: dict[str, Any] = {n: SglArgument(n, None) for n in program.arg_names}
    arguments.update(program.bind_arguments)
    tracer = TracerProgramState(_tracing_backend(backend), arguments, only_trace_prefix=True)
    try:
        with TracingScope(tracer):
            tracer.ret_value = program.func(tracer, **arguments)
    except (StopTracing, TypeError, AttributeError, KeyError, ValueError):
        pass  # the program needed a real value: the prefix ends here
    prefix = ""
    for node in tracer.flatten_nodes():
        if not isinstance(node, SglConstantText):
            break
        prefix += node.value
    return prefix


def trace_program(program: SglFunction, arguments: dict[str, Any], backend: Any
                  ) -> TracerProgramState:
    """Trace the whole program; arguments not given become placeholders."""
    arguments = dict(arguments)
    for name in program.arg_names:
        arguments.setdefault(name, SglArgument(name, None))
    arguments.update(program.bind_arguments)
    tracer = TracerProgramState(_tracing_backend(backend), arguments, only_trace_prefix=False)
    with TracingScope(tracer):
        tracer.ret_value = program.func(tracer, **arguments)
    return tracer


class TracerProgramState(ProgramState):
    """A program state that records nodes (``nodes``, ``last_node``) instead of running."""

    def __init__(self, backend: BaseBackend, arguments: dict[str, Any],
                 only_trace_prefix: bool) -> None:
        self.pid = uuid.uuid4().hex
        self.backend = backend
        self.arguments = arguments
        self.only_trace_prefix = only_trace_prefix
        self.nodes: list[SglExpr] = []
        self.last_node: SglExpr | None = None
        self.variables: dict[str, SglVariable] = {}
        self.messages_: list[dict[str, Any]] = []
        self.cur_role: str | None = None
        self.chat_template = backend.get_chat_template()
        self.child_states: list[TracerProgramState] = []
        self.ret_value: Any = None
        scope = current_tracing_scope()
        if scope is not None:
            scope.tracer_state.child_states.append(self)

    # -- building -------------------------------------------------------------------------

    def __iadd__(self, other: Any) -> TracerProgramState:
        if other is None:
            raise ValueError("tried to append None to the program state")
        self._execute(as_expr(other))
        return self

    def _execute(self, node: SglExpr) -> None:
        node.pid = self.pid
        if isinstance(node, SglExprList):
            for child in node.expr_list:
                self._execute(child)
        elif isinstance(node, SglConstantText):
            self._append(node)
        elif isinstance(node, (SglGen, SglSelect)):
            if self.only_trace_prefix:
                raise StopTracing()
            name = node.name or f"{type(node).__name__.lower()}_{len(self.variables)}"
            self.variables[name] = SglVariable(name, source=node)
            self._append(node)
        elif isinstance(node, SglRoleBegin):
            self._role_begin(node)
        elif isinstance(node, SglRoleEnd):
            self._append(SglConstantText(
                self.chat_template.get_prefix_and_suffix(node.role, self.messages_)[1]))
            self.messages_.append({"role": node.role, "content": ""})
            self.cur_role = None
        elif self.only_trace_prefix:
            raise StopTracing()
        else:
            self._append(node)

    def _append(self, node: SglExpr) -> None:
        self.nodes.append(node)
        node.prev_node = self.last_node
        self.last_node = node

    def _role_begin(self, node: SglRoleBegin) -> None:
        if self.cur_role is not None:
            raise ValueError(f"cannot begin a {node.role!r} role inside the {self.cur_role!r} "
                             f"role: roles do not nest")
        system = self.chat_template.default_system_prompt
        if not self.messages_ and node.role != "system" and system:
            self._role_begin(SglRoleBegin("system"))
            self._append(SglConstantText(system))
            self._execute(SglRoleEnd("system"))
        self.cur_role = node.role
        self._append(SglConstantText(
            self.chat_template.get_prefix_and_suffix(node.role, self.messages_)[0]))

    def _role(self, role: str, expr: Any = None) -> Any:
        if expr is not None:
            node = SglExprList([SglRoleBegin(role), as_expr(expr), SglRoleEnd(role)])
            self._execute(node)
            return node

        @contextmanager
        def scope() -> Iterator[None]:
            self._execute(SglRoleBegin(role))
            yield
            self._execute(SglRoleEnd(role))

        return scope()

    @contextmanager
    def var_scope(self, name: str) -> Iterator[None]:
        if self.only_trace_prefix:
            raise StopTracing()
        self._append(SglVarScopeBegin(name))
        yield
        self._append(SglVarScopeEnd(name))
        self.variables[name] = SglVariable(name, source=self.last_node)

    def fork(self, size: int = 1, position_ids_offset: list[int] | None = None
             ) -> ProgramStateGroup:
        if self.only_trace_prefix:
            raise StopTracing()
        fork = SglFork(size)
        fork.prev_node = self.last_node
        branches = []
        for i in range(size):
            branch = TracerProgramState(self.backend, self.arguments, False)
            item = SglGetForkItem(i)
            item.prev_node = fork
            branch.last_node = item
            branch.variables = dict(self.variables)
            branch.messages_ = list(self.messages_)
            branch.cur_role = self.cur_role
            branch.chat_template = self.chat_template
            branches.append(branch)
        return _TracedGroup(branches, self)

    # -- reading --------------------------------------------------------------------------

    def get_var(self, name: str) -> Any:
        if name in self.arguments:
            return self.arguments[name]
        if name not in self.variables:
            raise KeyError(f"no variable {name!r} while tracing")
        v = self.variables[name]
        return SglVariable(v.name, v.source)

    def set_var(self, name: str, value: Any) -> None:
        self.variables[name] = value

    def __contains__(self, name: str) -> bool:
        return name in self.variables

    def _not_while_tracing(self, what: str) -> Any:
        if self.only_trace_prefix:
            raise StopTracing()
        raise TypeError(f"{what} has no value while tracing")

    def text(self) -> str:
        return self._not_while_tracing("text()")

    def messages(self) -> list[dict[str, Any]]:
        return self._not_while_tracing("messages()")

    def get_meta_info(self, name: str) -> Any:
        return self._not_while_tracing("get_meta_info()")

    def sync(self) -> None:
        pass

    def error(self) -> None:
        return None

    def flatten_nodes(self) -> list[SglExpr]:
        """The recorded nodes with expression lists expanded, in order."""
        out: list[SglExpr] = []

        def walk(node: SglExpr) -> None:
            if isinstance(node, SglExprList):
                for child in node.expr_list:
                    walk(child)
            else:
                out.append(node)

        for node in self.nodes:
            walk(node)
        return out

    def __del__(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"TracerProgramState({len(self.nodes)} nodes)"


class _TracedGroup(ProgramStateGroup):
    def join(self, mode: str = "gather_variable") -> None:
        for branch in self.states:
            for name, var in branch.variables.items():
                self.src_state.variables.setdefault(name, var)
