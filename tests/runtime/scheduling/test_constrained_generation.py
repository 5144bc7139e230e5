"""Constrained generation through the Engine: outputs always satisfy the constraint (random
sampling on an untrained model is a good adversary), with and without jump-forward."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest

from radixlm.runtime.api.tokenizer_manager import GenerateError

SCHEMA = {
    "type": "object",
    "properties": {
        "customer_full_name": {"type": "string", "maxLength": 10},
        "customer_age_in_years": {"type": "integer", "minimum": 0, "maximum": 120},
        "preferred_contact_city": {"enum": ["Paris", "Rome", "Oslo"]},
        "is_active_subscriber": {"type": "boolean"},
        "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 2},
    },
    "required": ["customer_full_name", "customer_age_in_years", "preferred_contact_city",
                 "is_active_subscriber", "tags"],
    "additionalProperties": False,
}
PROMPT = "Document: Heidi is 6 years old and lives in Paris.\nJSON:"


@pytest.fixture(scope="module", params=[True, False], ids=["jump-forward", "no-jump-forward"])
def engine(request, make_engine, tiny_llama_path):
    return make_engine(tiny_llama_path, disable_jump_forward=not request.param,
                       page_size=4)


def test_json_schema_outputs_always_validate(engine):
    params = [{"temperature": 1.0, "max_new_tokens": 200, "seed": s,
               "json_schema": json.dumps(SCHEMA)} for s in range(12)]
    outs = engine.generate([PROMPT] * 12, params)
    tok = engine.tokenizer
    for o in outs:
        assert o["meta_info"]["finish_reason"]["type"] == "stop", o
        jsonschema.validate(json.loads(o["text"]), SCHEMA)
        # the text is exactly the decoded ids, whichever tokenization jump-forward chose
        assert o["text"] == tok.decode(o["output_ids"], skip_special_tokens=True)


def test_server_info_reports_how_long_steps_waited_for_masks(engine):
    before = engine.get_server_info()["mask_wait_steps"]
    # 60 tokens are below this schema's shortest output (65 here): opt out of closing
    out = engine.generate(PROMPT, {"temperature": 0.0, "max_new_tokens": 60,
                                   "close_within_max_tokens": False,
                                   "json_schema": json.dumps(SCHEMA)})
    info = engine.get_server_info()
    assert info["mask_wait_steps"] > before, "every constrained decode step is recorded"
    assert info["mask_wait_steps"] <= before + len(out["output_ids"])
    assert 0 <= info["mask_wait_ms_p50"] <= info["mask_wait_ms_p99"] <= info["mask_wait_ms_max"]
    assert info["mask_wait_cold_fills"] >= 0


def test_jump_forward_fills_long_keys_without_sampling(engine):
    out = engine.generate(PROMPT, {"temperature": 0.0, "max_new_tokens": 200,
                                   "json_schema": json.dumps(SCHEMA)})
    forced = out["meta_info"].get("jump_forward_tokens", 0)
    if engine.server_args.disable_jump_forward:
        assert forced == 0
    else:
        assert forced >= 10, "the schema's long keys should be forced, not sampled"
    jsonschema.validate(json.loads(out["text"]), SCHEMA)


def test_streamed_constrained_text_is_monotone_and_final(engine):
    chunks = list(engine.generate(PROMPT, {"temperature": 1.0, "seed": 3, "max_new_tokens": 200,
                                           "json_schema": json.dumps(SCHEMA)}, stream=True))
    texts = [c["text"] for c in chunks]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:]))
    whole = engine.generate(PROMPT, {"temperature": 1.0, "seed": 3, "max_new_tokens": 200,
                                     "json_schema": json.dumps(SCHEMA)})
    assert texts[-1] == whole["text"]


@pytest.mark.parametrize(("pattern", "full"), [
    (r"(25[0-5]|2[0-4]\d|1?\d?\d)(\.(25[0-5]|2[0-4]\d|1?\d?\d)){3}", None),
    (r"[A-Z][a-z]{2,6} (is|was) \d{1,2}", None),
])
def test_regex_outputs_full_match(engine, pattern, full):
    outs = engine.generate(["The value:"] * 6, [{"temperature": 1.0, "seed": s,
                                                 "max_new_tokens": 40, "regex": pattern}
                                                for s in range(6)])
    for o in outs:
        assert re.fullmatch(pattern, o["text"]), o["text"]


def test_choices_and_json_object(engine):
    outs = engine.generate(["Pick:"] * 6, [{"temperature": 1.0, "seed": s,
                                            "choices": ["yes", "no", "maybe later"]}
                                           for s in range(6)])
    assert {o["text"] for o in outs} <= {"yes", "no", "maybe later"}
    obj = engine.generate("JSON:", {"temperature": 1.0, "seed": 2, "max_new_tokens": 300,
                                    "json_object": True})
    if obj["meta_info"]["finish_reason"]["type"] == "stop":
        assert isinstance(json.loads(obj["text"]), dict)


def test_bad_constraints_are_refused_and_the_engine_carries_on(engine):
    with pytest.raises(GenerateError, match="not valid JSON"):
        engine.generate("x", {"json_schema": "{not json"})
    with pytest.raises(GenerateError, match="uniqueItems|not supported|cannot"):
        engine.generate("x", {"json_schema": json.dumps(
            {"type": "array", "items": {"type": "string"}, "uniqueItems": True})})
    with pytest.raises(GenerateError, match="regex"):
        engine.generate("x", {"regex": "(unclosed"})
    out = engine.generate("x", {"max_new_tokens": 2, "temperature": 0.0})
    assert out["meta_info"]["completion_tokens"] == 2


def test_budget_hit_while_decoding_ends_only_that_request(make_engine, tiny_llama_path):
    """The automaton grows lazily; past its state budget mid-generation the request ends with
    an error naming the budget, its batch-mates finish normally and the engine keeps serving."""
    engine = make_engine(tiny_llama_path, grammar_max_states=60, page_size=4)
    outs = engine.generate([PROMPT, PROMPT], [
        {"temperature": 1.0, "seed": 1, "max_new_tokens": 120, "regex": "[a-z]{300}"},
        {"temperature": 0.0, "max_new_tokens": 8}])
    failed, plain = outs
    assert failed["meta_info"]["finish_reason"]["type"] == "abort", failed["meta_info"]
    assert "states budget" in failed["meta_info"]["finish_reason"]["message"]
    assert re.fullmatch("[a-z]*", failed["text"]), failed["text"]
    assert plain["meta_info"]["finish_reason"]["type"] == "length"
    again = engine.generate(PROMPT, {"temperature": 0.0, "max_new_tokens": 8})
    assert again["text"] == plain["text"]
