"""The intermediate representation: the expressions a program appends to its state.

``s += "text" + gen("x")`` builds an :class:`SglExprList` of a constant and a gen node; the
interpreter executes nodes in order, the tracer records them into a graph. Class names follow
SGLang's so code importing them (``REGEX_INT`` etc. included) keeps working.
"""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

from .sampling import REGEX_BOOL, REGEX_FLOAT, REGEX_INT, REGEX_STR, SglSamplingParams

if TYPE_CHECKING:
    from .choices import ChoicesSamplingMethod

__all__ = [
    "REGEX_BOOL", "REGEX_FLOAT", "REGEX_INT", "REGEX_STR", "SglArgument", "SglCommitLazy",
    "SglConcateAndAppend", "SglConstantText", "SglExpr", "SglExprList", "SglFork", "SglGen",
    "SglGetForkItem", "SglImage", "SglRoleBegin", "SglRoleEnd", "SglSamplingParams",
    "SglSelect", "SglVarScopeBegin", "SglVarScopeEnd", "SglVariable", "SglVideo", "as_expr",
]

_node_ids = itertools.count()


class SglExpr:
    """Base of every node; ``a + b`` concatenates into an expression list."""

    def __init__(self) -> None:
        self.node_id = next(_node_ids)
        self.prev_node: SglExpr | None = None
        self.pid: str | None = None

    def __add__(self, other: Any) -> SglExprList:
        return _concat(self, as_expr(other))

    def __radd__(self, other: Any) -> SglExprList:
        return _concat(as_expr(other), self)

    def print_graph_dfs(self) -> str:
        """The traced graph ending at this node, one ``%id = ...`` line per node."""
        lines: list[str] = []
        seen: set[int] = set()

        def visit(node: SglExpr | None) -> None:
            if node is None or node.node_id in seen:
                return
            seen.add(node.node_id)
            visit(node.prev_node)
            if isinstance(node, SglExprList):
                for child in node.expr_list:
                    visit(child)
            elif isinstance(node, SglVariable):
                visit(node.source)
            head = f"%{node.node_id} = "
            if node.prev_node is not None and not isinstance(node, (SglFork, SglGetForkItem)):
                head += f"%{node.prev_node.node_id} + "
            lines.append(head + repr(node))

        visit(self)
        return "\n".join(lines) + "\n"


def as_expr(value: Any) -> SglExpr:
    """A string becomes constant text; expressions pass through; anything else is refused."""
    if isinstance(value, SglExpr):
        return value
    if isinstance(value, str):
        return SglConstantText(value)
    raise TypeError(f"expected a str or an sgl expression (gen, select, a role, ...), got "
                    f"{value!r} ({type(value).__name__})")


def _concat(a: SglExpr, b: SglExpr) -> SglExprList:
    left = a.expr_list if isinstance(a, SglExprList) else [a]
    right = b.expr_list if isinstance(b, SglExprList) else [b]
    return SglExprList(left + right)


class SglExprList(SglExpr):
    def __init__(self, expr_list: list[SglExpr]) -> None:
        super().__init__()
        self.expr_list = expr_list

    def __repr__(self) -> str:
        return f"ExprList({self.expr_list})"


class SglConstantText(SglExpr):
    def __init__(self, value: str) -> None:
        super().__init__()
        self.value = value

    def __repr__(self) -> str:
        return f"Constant({self.value!r})"


class SglArgument(SglExpr):
    """A placeholder for a program argument while tracing.

    It can be concatenated (``"Q: " + question``) but not formatted: an f-string or ``str()``
    would bake the placeholder into constant text, so both raise ``TypeError``.
    """

    def __init__(self, name: str, value: Any) -> None:
        super().__init__()
        self.name = name
        self.value = value

    def __repr__(self) -> str:
        return f"Argument(name={self.name}, value={self.value!r})"

    def __format__(self, spec: str) -> str:
        raise TypeError(f"cannot put program argument {self.name!r} inside an f-string while "
                        f"tracing; concatenate it instead: \"...\" + {self.name} + \"...\"")

    def __str__(self) -> str:
        raise TypeError(f"cannot convert program argument {self.name!r} to str while tracing")

    def __len__(self) -> int:
        return len(self.value)

    def __getitem__(self, i: Any) -> Any:
        return self.value[i]

    def __bool__(self) -> bool:
        return bool(self.value)


class SglGen(SglExpr):
    def __init__(self, name: str | None, sampling_params: SglSamplingParams) -> None:
        super().__init__()
        self.name = name
        self.sampling_params = sampling_params

    def __repr__(self) -> str:
        return f"Gen({self.name!r})"


class SglSelect(SglExpr):
    def __init__(self, name: str | None, choices: list[str], temperature: float,
                 choices_method: ChoicesSamplingMethod) -> None:
        super().__init__()
        self.name = name
        self.choices = choices
        self.temperature = temperature
        self.choices_method = choices_method

    def __repr__(self) -> str:
        return f"Select({self.name!r}, choices={self.choices}, method={self.choices_method})"


class SglRoleBegin(SglExpr):
    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def __repr__(self) -> str:
        return f"RoleBegin({self.role})"


class SglRoleEnd(SglExpr):
    def __init__(self, role: str) -> None:
        super().__init__()
        self.role = role

    def __repr__(self) -> str:
        return f"RoleEnd({self.role})"


class SglImage(SglExpr):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def __repr__(self) -> str:
        return f"Image({self.path!r})"


class SglVideo(SglExpr):
    def __init__(self, path: str, num_frames: int) -> None:
        super().__init__()
        self.path = path
        self.num_frames = num_frames

    def __repr__(self) -> str:
        return f"Video({self.path!r}, {self.num_frames})"


class SglVariable(SglExpr):
    """A variable of another state (``source``: its producing node while tracing, or the
    executor that owns it while running)."""

    def __init__(self, name: str, source: Any) -> None:
        super().__init__()
        self.name = name
        self.source = source

    def __repr__(self) -> str:
        src = f"%{self.source.node_id}" if isinstance(self.source, SglExpr) else "state"
        return f"Variable({self.name!r}, source={src})"


class SglVarScopeBegin(SglExpr):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def __repr__(self) -> str:
        return f"VarScopeBegin({self.name!r})"


class SglVarScopeEnd(SglExpr):
    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def __repr__(self) -> str:
        return f"VarScopeEnd({self.name!r})"


class SglFork(SglExpr):
    """Tracer only: the point where a state splits into ``number`` branches."""

    def __init__(self, number: int) -> None:
        super().__init__()
        self.number = number

    def __repr__(self) -> str:
        prev = self.prev_node.node_id if self.prev_node is not None else None
        return f"Fork(%{prev}, number={self.number})"


class SglGetForkItem(SglExpr):
    """Tracer only: branch ``index`` of a fork."""

    def __init__(self, index: int) -> None:
        super().__init__()
        self.index = index

    def __repr__(self) -> str:
        prev = self.prev_node.node_id if self.prev_node is not None else None
        return f"GetForkItem(%{prev}, index={self.index})"


class SglCommitLazy(SglExpr):
    """Send the text so far as a prefill-only request (before a fork)."""

    def __repr__(self) -> str:
        return "CommitLazy()"


class SglConcateAndAppend(SglExpr):
    """Append the branches' new text to the parent (``join(mode="concate_and_append")``)."""

    def __init__(self, states: list[Any]) -> None:
        super().__init__()
        self.states = states

    def __repr__(self) -> str:
        return f"ConcateAndAppend({len(self.states)} states)"
