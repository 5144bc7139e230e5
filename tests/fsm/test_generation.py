"""Random logits masked by our bitmasks always produce JSON that parses and validates.

The adversary samples from ``torch.randn`` logits after the bitmask is applied (the kernel the
runtime uses), with and without jump-forward; lengths are bounded by explicit limits so every
walk ends. Corpus schemas come from the JSONSchemaBench sample (a deterministic few per subset
by default, more with ``-m slow``; the benchmark script walks every schema).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import jsonschema
import pytest
import torch

from radixlm.fsm import (
    CompileBudget,
    GrammarBudgetError,
    GrammarCompiler,
    GrammarError,
    GrammarSpec,
    JsonLimits,
)
from radixlm.fsm.automaton.lazy_dfa import shortest_completion
from radixlm.testing.grammar_walk import random_walk

LIMITS = JsonLimits(max_recursion_depth=2, any_value_depth=2, max_string_length=8,
                    max_array_items=3, max_object_properties=2, max_number_digits=4)
MAX_SHORTEST = 200  # schemas whose shortest output is longer are not walked
# Tests refuse what a server would find too costly sooner than the default budget does,
# counted in work steps per mask (TermBuilder.work_steps: derivative calls and liveness
# expansions), never in wall time, which a loaded machine stretches.
BUDGET = CompileBudget(max_mask_steps=10_000, max_mask_seconds=float("inf"))

HANDWRITTEN = [
    {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer",
     "minimum": 0, "maximum": 120}, "email": {"type": "string", "format": "email"}},
     "required": ["name", "age"]},
    {"type": "array", "items": {"oneOf": [{"type": "string", "pattern": "^[a-z]+$"},
                                          {"type": "number", "exclusiveMinimum": 0}]},
     "minItems": 1},
    {"type": "object", "properties": {"when": {"type": "string", "format": "date-time"},
                                      "id": {"type": "string", "format": "uuid"},
                                      "ip": {"type": "string", "format": "ipv6"}},
     "required": ["when", "id", "ip"], "additionalProperties": False},
    {"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                                                         "kids": {"type": "array", "items": {
                                                             "$ref": "#/$defs/node"}}},
                        "required": ["v"]}}, "$ref": "#/$defs/node"},
    {"type": "object", "patternProperties": {"^x-": {"type": "boolean"}},
     "propertyNames": {"maxLength": 5}, "minProperties": 1},
    {"type": "object", "if": {"properties": {"kind": {"const": "a"}}, "required": ["kind"]},
     "then": {"required": ["alpha"]}, "else": {"required": ["beta"]},
     "properties": {"kind": {"enum": ["a", "b"]}, "alpha": {"type": "integer", "multipleOf": 5},
                    "beta": {"type": "number", "not": {"const": 0}}}},
    {"type": "string", "pattern": "^(?:[A-Z]{2}-)?[0-9]{3}$"},
    {"enum": ["red", 1, None, {"deep": [True, "x"]}]},
]


def _corpus_schemas(corpus: Path, per_subset: int | None) -> list[tuple[str, dict]]:
    out = []
    for subset in sorted(p for p in corpus.iterdir() if p.is_dir()):
        files = sorted(subset.glob("*.json"))
        for f in files[:per_subset] if per_subset else files:
            out.append((f"{subset.name}/{f.stem}", json.loads(f.read_text())["schema"]))
    return out


def _validator(schema):  # noqa: ANN001, ANN202
    cls = jsonschema.validators.validator_for(schema if isinstance(schema, dict) else {},
                                              default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _check_walks(compiler, tokenizer, vocab, schema, jump: bool, walks: int, seed: int) -> int:  # noqa: ANN001
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grammar = compiler.compile(GrammarSpec.json_schema(schema, limits=LIMITS))
    except GrammarError:
        return 0  # refused by name: not claimed
    shortest = shortest_completion(grammar.dfa, grammar.initial_state)
    if shortest is None or len(shortest) > MAX_SHORTEST:
        return 0  # no output short enough for a bounded walk (e.g. minLength 10000)
    validator = _validator(schema)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(walks):
        try:
            text, _ = random_walk(grammar, tokenizer, vocab, gen, jump)
        except GrammarBudgetError:
            return 0  # the runtime fails such a request by name; never an invalid output
        value = json.loads(text)
        errors = [e.message for e in validator.iter_errors(value)]
        assert not errors, (text, errors[:3])
    return walks


@pytest.fixture(scope="module")
def bounded_compiler(vocab) -> GrammarCompiler:  # noqa: ANN001
    return GrammarCompiler(vocab, BUDGET)


@pytest.mark.parametrize("jump", [False, True], ids=["plain", "jump-forward"])
@pytest.mark.parametrize("index", range(len(HANDWRITTEN)))
def test_handwritten_schemas(bounded_compiler, tokenizer, vocab, index: int, jump: bool) -> None:  # noqa: ANN001
    assert _check_walks(bounded_compiler, tokenizer, vocab, HANDWRITTEN[index], jump,
                        walks=4, seed=index) == 4


@pytest.mark.parametrize("jump", [False, True], ids=["plain", "jump-forward"])
def test_corpus_sample(bounded_compiler, tokenizer, vocab, corpus_dir, jump: bool) -> None:  # noqa: ANN001
    assert _walk_corpus(bounded_compiler, tokenizer, vocab, corpus_dir, jump, 2) >= 25


def _walk_corpus(compiler, tokenizer, vocab, corpus_dir, jump: bool, per_subset: int) -> int:  # noqa: ANN001
    """One walk per schema of the first ``per_subset`` schemas of each subset; walks checked."""
    return sum(_check_walks(compiler, tokenizer, vocab, schema, jump, walks=1, seed=i)
               for i, (_, schema) in enumerate(_corpus_schemas(corpus_dir, per_subset)))


@pytest.mark.slow
@pytest.mark.parametrize("jump", [False, True], ids=["plain", "jump-forward"])
def test_corpus_wide(bounded_compiler, tokenizer, vocab, corpus_dir, jump: bool) -> None:  # noqa: ANN001
    """A wider deterministic sample (every schema: ``benchmarks/json_decoding.py``)."""
    assert _walk_corpus(bounded_compiler, tokenizer, vocab, corpus_dir, jump, 8) >= 100
