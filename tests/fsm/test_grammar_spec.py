"""Grammar specs: validated, canonical, hashable; dtypes and Pydantic models."""

from __future__ import annotations

import re

import pytest

from radixlm.fsm import CompileBudget, GrammarError, GrammarSpec, JsonLimits
from radixlm.fsm.grammar_compiler import spec_to_node
from radixlm.fsm.regex.tree import render


def test_equivalent_inputs_share_a_key() -> None:
    a = GrammarSpec.json_schema('{"type": "object"}')
    b = GrammarSpec.json_schema({"type": "object"})
    assert a == b and a.cache_key() == b.cache_key()
    assert a.cache_key() != GrammarSpec.json_schema({"type": "object"}, lenient=True).cache_key()


def test_pydantic_model_class() -> None:
    pydantic = pytest.importorskip("pydantic")

    class Item(pydantic.BaseModel):
        name: str

    spec = GrammarSpec.json_schema(Item)
    assert '"name"' in spec.value


@pytest.mark.parametrize("kind, good, bad", [
    ("int", ["12", "-3", "+7"], ["1.5", ""]),
    ("float", ["1.5", ".5", "-2"], ["1.", "a"]),
    ("bool", ["True", "False"], ["true"]),
    ("str", ['"hi there"'], ['"a\nb"']),
])
def test_dtypes(kind: str, good: list[str], bad: list[str]) -> None:
    regex = render(spec_to_node(GrammarSpec(kind))[0])
    assert all(re.fullmatch(regex, g) for g in good)
    assert not any(re.fullmatch(regex, b) for b in bad)


@pytest.mark.parametrize("args, message", [
    (("yaml", "x"), "kind must be one of"),
    (("regex", 5), "expected a string"),
    (("choices", []), "non-empty list"),
    (("choices", "ab"), "non-empty list"),
    (("int", "x"), "takes no value"),
    (("json_schema", "{bad"), "not valid JSON"),
])
def test_invalid_specs(args: tuple, message: str) -> None:
    with pytest.raises(GrammarError, match=message):
        GrammarSpec(*args)


@pytest.mark.parametrize("kwargs", [{"max_seconds": 0}, {"max_states": 1},
                                    {"max_memory_bytes": 10}, {"warmup_states": -1}])
def test_budget_validation(kwargs: dict) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        CompileBudget(**kwargs)


def test_limits_validation() -> None:
    with pytest.raises(ValueError, match="max_string_length"):
        JsonLimits(max_string_length=0)
