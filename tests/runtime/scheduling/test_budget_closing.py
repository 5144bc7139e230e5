"""Closing a constrained output within max_new_tokens, through the Engine on the tiny model:
random sampling on an untrained model is a good adversary (it never closes on its own)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from radixlm.runtime.api.tokenizer_manager import GenerateError
from radixlm.runtime.scheduling.budget_closing import BUDGET_CLOSED

PROMPT = "Document: Heidi is 6 years old and lives in Paris.\nJSON:"
SCHEMAS = {
    "object": {
        "type": "object",
        "properties": {"name": {"type": "string"}, "age": {"type": "number"},
                       "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["name", "age", "tags"],
    },
    "enum": {"type": "object", "properties": {"city": {"enum": ["Paris", "Rome", "Oslo"]},
                                              "ok": {"type": "boolean"}},
             "required": ["city", "ok"], "additionalProperties": False},
    "nested": {
        "type": "object",
        "properties": {"person": {"type": "object",
                                  "properties": {"first": {"type": "string"},
                                                 "years": {"type": "integer", "minimum": 0}},
                                  "required": ["first", "years"]},
                       "items": {"type": "array", "minItems": 1,
                                 "items": {"type": "object",
                                           "properties": {"id": {"type": "integer"}},
                                           "required": ["id"]}}},
        "required": ["person", "items"],
    },
}


# speculative: the grammar's forced text and prompt lookup become drafts, verified in one
# extend whose rows are cut to the budget as a plain step's mask is (speculative_verify.py)
SETTINGS = {"jump-forward": {}, "no-jump-forward": {"disable_jump_forward": True},
            "speculative": {"speculative_algorithm": "NGRAM"}}


@pytest.fixture(scope="module", params=sorted(SETTINGS))
def engine(request, make_engine, tiny_llama_path):  # noqa: ANN001, ANN201
    return make_engine(tiny_llama_path, page_size=4, **SETTINGS[request.param])


def _shortest(engine, schema: dict) -> int:  # noqa: ANN001
    """The budget the engine asks for: read from its refusal of max_new_tokens=1."""
    with pytest.raises(GenerateError) as info:
        engine.generate(PROMPT, {"max_new_tokens": 1, "json_schema": json.dumps(schema)})
    text = str(info.value)
    assert "max_new_tokens (1) is below the" in text, text
    return int(text.split("is below the ")[1].split(" tokens")[0])


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_outputs_validate_at_tight_budgets(engine, name: str) -> None:  # noqa: ANN001
    schema = SCHEMAS[name]
    need = _shortest(engine, schema)
    closed = 0
    for extra in (0, 1, 5):
        params = [{"temperature": 1.0, "seed": s, "max_new_tokens": need + extra,
                   "json_schema": json.dumps(schema)} for s in range(4)]
        for out in engine.generate([PROMPT] * 4, params):
            assert len(out["output_ids"]) <= need + extra
            jsonschema.validate(json.loads(out["text"]), schema)
            reason = out["meta_info"]["finish_reason"]
            assert reason["type"] in ("length", "stop"), reason
            if reason["type"] == "length":
                assert reason.get("message") == BUDGET_CLOSED, reason
                closed += 1
    assert closed, "an untrained model never closes on its own: the budget must have"


def test_a_budget_below_the_shortest_output_is_refused(engine) -> None:  # noqa: ANN001
    schema = SCHEMAS["object"]
    need = _shortest(engine, schema)
    with pytest.raises(GenerateError, match=f"at least {need}") as info:
        engine.generate(PROMPT, {"max_new_tokens": need - 1, "json_schema": json.dumps(schema)})
    assert info.value.code == "invalid_request"  # HTTP 400
    # exactly the shortest output's length is enough (greedy: the model's own choices)
    out = engine.generate(PROMPT, {"temperature": 0.0, "max_new_tokens": need,
                                   "json_schema": json.dumps(schema)})
    jsonschema.validate(json.loads(out["text"]), schema)


def test_opting_out_cuts_the_output_at_the_limit(engine) -> None:  # noqa: ANN001
    schema = SCHEMAS["object"]
    out = engine.generate(PROMPT, {"temperature": 1.0, "seed": 0, "max_new_tokens": 3,
                                   "close_within_max_tokens": False,
                                   "json_schema": json.dumps(schema)})
    assert out["meta_info"]["finish_reason"] == {"type": "length", "length": 3}
    with pytest.raises(json.JSONDecodeError):
        json.loads(out["text"])


def test_greedy_output_is_unchanged_when_the_budget_is_never_tight(engine) -> None:  # noqa: ANN001
    schema = json.dumps(SCHEMAS["enum"])
    closed = engine.generate(PROMPT, {"temperature": 0.0, "max_new_tokens": 200,
                                      "json_schema": schema})
    cut = engine.generate(PROMPT, {"temperature": 0.0, "max_new_tokens": 200,
                                   "close_within_max_tokens": False, "json_schema": schema})
    assert closed["output_ids"] == cut["output_ids"]
    assert closed["meta_info"]["finish_reason"] == cut["meta_info"]["finish_reason"]


def test_stop_strings_still_end_a_closing_output(engine) -> None:  # noqa: ANN001
    params = {"temperature": 1.0, "seed": 1, "max_new_tokens": 6, "regex": "abc[a-z]{0,9}",
              "stop": "bc"}
    out = engine.generate(PROMPT, params)
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": "bc"}
    assert out["text"] == "a"
