"""fsm imports nothing else of radixlm, its modules form no import circle except the one that
is the API's shape (a compiled grammar makes matchers, a matcher holds its grammar), and its
stages import only downward: errors <- regex <- automaton <- tokens <- grammars <- compile <-
the root modules (see ``radixlm/fsm/__init__.py``)."""

from __future__ import annotations

import ast
from pathlib import Path

import radixlm.fsm

FSM_DIR = Path(radixlm.fsm.__file__).parent
ALLOWED_CYCLES = [{"radixlm.fsm.compiled_grammar", "radixlm.fsm.matcher"}]
# The stages, lowest first: a module may import its own stage's modules and lower stages'.
# errors.py (imports nothing) is the base every stage reports with; anything else at the root
# (spec, compiler, compiled grammar, matcher, jump-forward, the package itself) is the top.
STAGES = ["errors", "regex", "automaton", "tokens", "grammars", "compile", "root"]


def _module_names() -> dict[str, Path]:
    out = {}
    for path in FSM_DIR.rglob("*.py"):
        parts = ("radixlm", "fsm", *path.relative_to(FSM_DIR).with_suffix("").parts)
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """Every module ``name`` imports (top level, function level and TYPE_CHECKING alike);
    ``from package import name`` counts as importing the submodule when there is one."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return found


def _graph() -> dict[str, set[str]]:
    modules = _module_names()
    return {name: {m for m in _imports(name, path, modules) if m in modules and m != name}
            for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                component = set()
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    component.add(w)
                    if w == v:
                        break
                if len(component) > 1:
                    out.append(component)
    return out


def test_fsm_imports_nothing_else_of_radixlm() -> None:
    modules = _module_names()
    outside = {(name, m) for name, path in modules.items()
               for m in _imports(name, path, modules)
               if m.startswith("radixlm") and not m.startswith("radixlm.fsm")}
    assert not outside


def test_fsm_has_no_import_circle_but_the_grammar_matcher_pair() -> None:
    cycles = _cycles(_graph())
    assert [c for c in cycles if c not in ALLOWED_CYCLES] == []


def _stage(name: str) -> str:
    """The stage of an fsm module: its sub-package, ``errors``, or ``root``."""
    parts = name.split(".")
    return parts[2] if len(parts) > 2 and parts[2] in STAGES else "root"


def test_stage_of_a_module() -> None:
    assert _stage("radixlm.fsm.grammars.json.compiler") == "grammars"
    assert _stage("radixlm.fsm.errors") == "errors"
    assert _stage("radixlm.fsm.matcher") == "root"
    assert _stage("radixlm.fsm") == "root"


def test_every_fsm_sub_package_is_a_stage() -> None:
    packages = {name.split(".")[2] for name, path in _module_names().items()
                if path.name == "__init__.py" and name.count(".") == 2}
    assert packages <= set(STAGES)


def test_fsm_stages_import_only_downward() -> None:
    rank = {stage: i for i, stage in enumerate(STAGES)}
    upward = sorted((name, m) for name, deps in _graph().items() for m in deps
                    if rank[_stage(m)] > rank[_stage(name)])
    assert upward == []


def test_cycle_finder_sees_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(graph) == [{"a", "b", "c"}]
