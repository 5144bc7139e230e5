"""Compile a GBNF/EBNF grammar into a regex tree, where the grammar is regular.

Rules without recursion are inlined (shared nodes, so a rule used many times is one node).
A rule that can reach itself (directly or through other rules) describes nesting a finite
automaton cannot count in general, so by default it is refused by name, with the cycle::

    ebnf: rule 'expr' is recursive (expr -> term -> factor -> expr), which a finite automaton
    cannot match in general ...

With ``max_recursion_depth = N`` recursion is unrolled instead: entering a recursive cycle
starts at level N, each time a rule is re-entered while it is already being expanded (the
cycle closes) the expansion drops one level, and a cycle closing at level 0 matches nothing.
So a recursive rule nests inside itself at most N times (``"(" expr ")"`` allows N levels of
parentheses); everything accepted is a sentence of the grammar (the language is a subset:
only deeper nestings are missing), and the tree grows linearly in N (one copy of the cycle's
rules per level).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..errors import GrammarError
from ..regex import tree as ra
from .ebnf_parser import (
    Choice,
    Expr,
    Grammar,
    Ref,
    Repetition,
    Sequence,
    Terminal,
    parse_ebnf,
    references,
)

MAX_RECURSION_DEPTH = 64  # larger depths are refused: the tree grows linearly in the depth


@dataclass(frozen=True)
class EbnfOptions:
    """How a grammar is compiled: ``start`` rule, and how deep recursion is unrolled (0:
    recursive rules are refused by name; N: they nest at most N times)."""

    start: str = "root"
    max_recursion_depth: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.max_recursion_depth, int) or \
                not 0 <= self.max_recursion_depth <= MAX_RECURSION_DEPTH:
            raise GrammarError(f"ebnf max_recursion_depth must be an int in 0.."
                               f"{MAX_RECURSION_DEPTH}, got {self.max_recursion_depth!r}")
        if not isinstance(self.start, str) or not self.start:
            raise GrammarError(f"ebnf start rule must be a non-empty name, got {self.start!r}")


def strongly_connected(graph: dict[str, set[str]]) -> dict[str, int]:
    """Component id per node (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    comp: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    counter = next_id = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                cid = next_id
                next_id += 1
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp[member] = cid
                    if member == node:
                        break
    return comp


def _cycle(graph: dict[str, set[str]], comp: dict[str, int], name: str) -> list[str]:
    """A shortest path name -> ... -> name inside its component (for the error message)."""
    parent: dict[str, str | None] = {name: None}
    frontier = [name]
    while frontier:
        nxt = []
        for node in frontier:
            for succ in sorted(graph[node]):
                if succ == name:
                    path = [node]
                    while parent[path[-1]] is not None:
                        path.append(parent[path[-1]])  # type: ignore[arg-type]
                    return [*reversed(path), name]
                if comp.get(succ) == comp[name] and succ not in parent:
                    parent[succ] = node
                    nxt.append(succ)
        frontier = nxt
    return [name, name]


class EbnfCompiler:
    """Resolves the rules of one grammar into a regex tree (see the module docstring)."""

    def __init__(self, grammar: Grammar, options: EbnfOptions,
                 deadline: Callable[[], None] | None = None) -> None:
        self.grammar = grammar
        self.options = options
        self.check_deadline = deadline or (lambda: None)
        self.graph = {name: references(expr) for name, expr in grammar.rules.items()}
        self.comp = strongly_connected(self.graph)
        sizes: dict[int, int] = {}
        for cid in self.comp.values():
            sizes[cid] = sizes.get(cid, 0) + 1
        self.recursive = {name for name, cid in self.comp.items()
                          if sizes[cid] > 1 or name in self.graph[name]}
        self._plain: dict[str, ra.Node] = {}
        self._levels: dict[tuple[str, int], ra.Node] = {}

    def compile(self) -> ra.Node:
        """The regex tree of the start rule; :class:`GrammarError` if refused or empty."""
        reachable = self._reachable(self.grammar.start)
        recursive = [n for n in self.grammar.rules if n in reachable and n in self.recursive]
        if recursive and self.options.max_recursion_depth == 0:
            name = recursive[0]
            cycle = " -> ".join(_cycle(self.graph, self.comp, name))
            raise GrammarError(
                f"ebnf: rule {name!r} is recursive ({cycle}), which a finite automaton cannot "
                f"match in general (non-regular); rewrite the recursion as repetition (e.g. "
                f"'list ::= item list | item' as 'list ::= item+') or allow bounded nesting "
                f"with max_recursion_depth=N (at most {MAX_RECURSION_DEPTH})")
        node = self._enter(self.grammar.start)
        if node is ra.EMPTY:
            raise GrammarError(
                f"ebnf: rule {self.grammar.start!r} matches nothing within max_recursion_depth="
                f"{self.options.max_recursion_depth} (every alternative needs deeper nesting)")
        return node

    def _reachable(self, start: str) -> set[str]:
        seen, todo = {start}, [start]
        while todo:
            for succ in self.graph[todo.pop()]:
                if succ not in seen:
                    seen.add(succ)
                    todo.append(succ)
        return seen

    def _enter(self, name: str) -> ra.Node:
        """A reference from outside ``name``'s component: a fresh expansion."""
        if name not in self.recursive:
            hit = self._plain.get(name)
            if hit is None:
                self.check_deadline()
                hit = self._build(self.grammar.rules[name], name, 0, frozenset())
                self._plain[name] = hit
            return hit
        return self._level(name, self.options.max_recursion_depth, frozenset())

    def _level(self, name: str, level: int, stack: frozenset[str]) -> ra.Node:
        """Rule ``name`` of a recursive component expanded at ``level``; ``stack``: the
        component's rules being expanded at this level (re-entering one drops a level)."""
        key = (name, level)
        hit = self._levels.get(key)
        if hit is None:
            # sound to share across stacks: every variant only matches sentences of `name`
            self.check_deadline()
            hit = self._build(self.grammar.rules[name], name, level, stack | {name})
            self._levels[key] = hit
        return hit

    def _ref(self, target: str, owner: str, level: int, stack: frozenset[str]) -> ra.Node:
        if target not in self.recursive or self.comp[target] != self.comp[owner]:
            return self._enter(target)
        if target in stack:  # the cycle closes: one level down
            if level == 0:
                return ra.EMPTY
            return self._level(target, level - 1, frozenset())
        return self._level(target, level, stack)

    def _build(self, expr: Expr, owner: str, level: int, stack: frozenset[str]) -> ra.Node:
        if isinstance(expr, Terminal):
            return expr.node
        if isinstance(expr, Ref):
            return self._ref(expr.name, owner, level, stack)
        if isinstance(expr, Sequence):
            return ra.seq(*(self._build(i, owner, level, stack) for i in expr.items))
        if isinstance(expr, Choice):
            return ra.alt(*(self._build(o, owner, level, stack) for o in expr.options))
        if isinstance(expr, Repetition):
            return ra.repeat(self._build(expr.item, owner, level, stack), expr.lo, expr.hi)
        raise TypeError(f"not a grammar expression: {expr!r}")


def ebnf_to_node(text: str, options: EbnfOptions | None = None,
                 deadline: Callable[[], None] | None = None) -> ra.Node:
    """Parse and compile grammar text into a regex tree (see the module docstring)."""
    options = options or EbnfOptions()
    return EbnfCompiler(parse_ebnf(text, options.start), options, deadline).compile()
