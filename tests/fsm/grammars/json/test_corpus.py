"""JSONSchemaBench: for every schema we compile, every instance ``jsonschema`` calls valid is
accepted and every invalid one rejected (labels are not trusted: three are wrong); the printed
regex agrees with the automaton (Python ``re``); declared coverage stays above the bar.

A deterministic few schemas per subset run by default; every schema with ``-m slow``. An
instance is *undecided* (and not counted) when the key-order search runs out of budget
without finding an accepted spelling.
"""

from __future__ import annotations

import json
import re
import warnings
from collections import Counter
from pathlib import Path

import jsonschema
import pytest

from radixlm.fsm import GrammarBudgetError, GrammarError
from radixlm.fsm.automaton.derivatives import TermBuilder
from radixlm.fsm.automaton.lazy_dfa import LazyDFA
from radixlm.fsm.grammars.json import JsonSchemaOptions, json_schema_to_node
from radixlm.fsm.grammars.json.witness import find_accepted_text
from radixlm.fsm.regex import tree as ra

MAX_REGEX_FOR_PYTHON = 200_000  # Python's re is slow to compile beyond this


def _judge(schema):  # noqa: ANN001, ANN202
    cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                              default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def check_file(path: Path, stats: Counter) -> list[str]:
    """Compile one corpus file and test its instances; returns disagreements."""
    doc = json.loads(path.read_text())
    schema = doc["schema"]
    stats["schemas"] += 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            node, _ = json_schema_to_node(schema, JsonSchemaOptions())
            builder = TermBuilder()
            dfa = LazyDFA(builder, builder.lower(node))
    except GrammarError:
        return []  # refused by name: not claimed
    stats["compiled"] += 1
    judge = _judge(schema)
    try:
        rendered = re.compile(ra.render(node, max_chars=MAX_REGEX_FOR_PYTHON))
    except (ra.RenderTooLargeError, re.error, RecursionError):
        rendered = None  # too large for Python's re: the automaton alone is checked
    problems: list[str] = []
    try:
        _judge_instances(path, doc, dfa, judge, rendered, stats, problems)
    except GrammarBudgetError:
        # a later state's liveness hit the budget: the schema is refused by name while
        # decoding (the request would end with that error), so it is not claimed; what was
        # judged before stays judged
        stats["compiled"] -= 1
        stats["refused_while_decoding"] += 1
    return problems


def _judge_instances(path: Path, doc: dict, dfa: LazyDFA, judge, rendered,  # noqa: ANN001
                     stats: Counter, problems: list[str]) -> None:
    for test in doc["tests"]:
        truth = judge.is_valid(test["data"])
        found = find_accepted_text(dfa, test["data"])
        if found.text is None and found.truncated:
            stats["undecided"] += 1
            continue
        accepted = found.text is not None
        stats["valid" if truth else "invalid"] += 1
        if accepted != truth:
            problems.append(f"{path.parent.name}/{path.name}: jsonschema says {truth}, grammar "
                            f"{accepted}: {json.dumps(test['data'])[:200]}")
        if accepted and rendered is not None and not rendered.fullmatch(found.text):
            problems.append(f"{path.name}: printed regex rejects {found.text[:200]}")


def _files(corpus: Path, per_subset: int | None) -> list[Path]:
    out = []
    for subset in sorted(p for p in corpus.iterdir() if p.is_dir()):
        files = sorted(subset.glob("*.json"))
        out += files[:per_subset] if per_subset else files
    return out


def test_corpus_sample(corpus_dir: Path) -> None:
    stats: Counter = Counter()
    problems = [p for f in _files(corpus_dir, 5) for p in check_file(f, stats)]
    assert not problems, problems[:5]
    assert stats["compiled"] >= 0.8 * stats["schemas"]
    # undecided: no accepted key order found within the search budget, but not every order
    # was tried (invalid instances of objects with many optional and additional keys)
    assert stats["undecided"] <= 0.1 * (stats["valid"] + stats["invalid"])


@pytest.mark.slow
def test_corpus_full(corpus_dir: Path) -> None:
    stats: Counter = Counter()
    medium: Counter = Counter()
    problems = []
    for f in _files(corpus_dir, None):
        problems += check_file(f, medium if f.parent.name == "Github_medium" else stats)
    assert not problems, problems[:5]
    assert medium["compiled"] >= 0.9 * medium["schemas"]  # the bar for Github_medium
    # schemas whose decoding runs into the liveness budget are refused, but rarely
    assert stats["refused_while_decoding"] + medium["refused_while_decoding"] <= 5
