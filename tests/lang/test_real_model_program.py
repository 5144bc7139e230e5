"""A program of the language on the real model (fork + gen(json_schema=...) + select) gives
exactly what the Engine gives for the same requests sent by hand."""

from __future__ import annotations

import json

import pytest

import radixlm as sgl
from radixlm.lang.backend.select_scoring import choice_start
from radixlm.runtime.api.engine import Engine

SCHEMA = {"type": "object",
          "properties": {"name": {"type": "string", "maxLength": 16},
                         "age": {"type": "integer", "minimum": 0, "maximum": 120}},
          "required": ["name", "age"], "additionalProperties": False}
DOCS = ["Priya is 45 years old.", "Hugo, aged 19, studies in Madrid."]
VERDICTS = ["yes", "no"]


@sgl.function
def extract_and_judge(s, docs):
    s += sgl.system("Extract the person as JSON.")
    branches = s.fork(len(docs))
    for branch, doc in zip(branches, docs):
        branch += sgl.user(doc)
        branch += sgl.assistant(sgl.gen("record", max_tokens=40, json_schema=json.dumps(SCHEMA),
                                        temperature=0))
    branches.join()
    s += sgl.user("Are both records correct? Answer yes or no.")
    s += sgl.assistant(sgl.select("verdict", VERDICTS))
    return [b["record"] for b in branches]


@pytest.fixture(scope="module")
def engine(real_model):
    with Engine(model_path=str(real_model.folder), max_total_tokens=4096) as eng:
        yield eng


def test_program_outputs_equal_the_engines(engine):
    state = extract_and_judge.run(docs=DOCS, backend=engine)
    records = state.ret_value
    tok = engine.tokenizer
    system = {"role": "system", "content": "Extract the person as JSON."}
    for doc, record in zip(DOCS, records):
        prompt = tok.apply_chat_template([system, {"role": "user", "content": doc}],
                                         tokenize=False, add_generation_prompt=True)
        direct = engine.generate(prompt, {"temperature": 0, "max_new_tokens": 40,
                                          "json_schema": json.dumps(SCHEMA)})
        assert record == direct["text"]
        assert set(json.loads(record)) == {"name", "age"}
    # select: the choice with the highest length-normalized logprob the engine reports.
    meta = state.get_meta_info("verdict")
    scores = meta["normalized_prompt_logprobs"]
    assert state["verdict"] == VERDICTS[max(range(len(VERDICTS)), key=scores.__getitem__)]
    text = state.text()
    prefix = text[: text.rindex(state["verdict"])]  # the assistant turn's end marker follows
    for choice, score in zip(VERDICTS, scores):
        ids = tok(prefix + choice).input_ids
        start = choice_start(tok(prefix).input_ids, ids)
        out = engine.generate(input_ids=ids, sampling_params={"max_new_tokens": 0},
                              return_logprob=True, logprob_start_len=start)
        lps = [e[0] for e in out["meta_info"]["input_token_logprobs"] if e[0] is not None]
        assert score == pytest.approx(sum(lps) / len(lps), abs=1e-4)
