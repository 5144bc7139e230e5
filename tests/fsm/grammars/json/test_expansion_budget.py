"""The anyOf/oneOf/if distribution budget fails fast: a product of pending groups larger than
what is left is refused before any combination is compiled (budget in expansions, not time)."""

from __future__ import annotations

import pytest

from radixlm.fsm import GrammarBudgetError
from radixlm.fsm.grammars.json import JsonSchemaOptions, SchemaCompiler


def _pairs(n: int) -> dict:
    """n independent two-way choices on one object: 2^n combinations."""
    return {"type": "object",
            "allOf": [{"anyOf": [{"required": [f"a{i}"]}, {"required": [f"b{i}"]}]}
                      for i in range(n)]}


@pytest.mark.parametrize("n, budget", [(13, 4096), (7, 100), (40, 4096)])
def test_oversized_distribution_refused_before_expanding(n: int, budget: int) -> None:
    compiler = SchemaCompiler(_pairs(n), JsonSchemaOptions(max_expansions=budget))
    with pytest.raises(GrammarBudgetError, match="expansion.*combinations"):
        compiler.compile()
    assert compiler._expansions <= 2  # the root facts only: no combination was compiled


def test_distribution_within_budget_compiles(check_schema) -> None:  # noqa: ANN001
    check_schema(_pairs(3), ['{"a0":1,"a1":1,"a2":1}', '{"b0":1,"a1":1,"b2":1}'],
                 ['{"a0":1,"a1":1}', "{}"], max_expansions=64)
