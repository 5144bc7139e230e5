"""EBNF and structural-tag constraints through the Engine (sampling params ``ebnf`` and
``structural_tag``): outputs always satisfy them; recursive grammars are refused by name or,
with the server's recursion depth, nest at most that deep."""

from __future__ import annotations

import json
import re

import pytest

from radixlm.runtime.api.tokenizer_manager import GenerateError

COMMANDS = r"""
root ::= cmd ("; " cmd){0,2}
cmd  ::= ("go " ("north" | "south")) | ("say " [a-z]{1,6})
"""
CMD = r"(go (north|south)|say [a-z]{1,6})"
COMMAND_RE = re.compile(rf"{CMD}(; {CMD}){{0,2}}")
PARENS = 'root ::= "(" root ")" | "x"'
TAG = {"structures": [{"begin": "<f>", "schema": {"type": "object", "properties": {
    "n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"],
    "additionalProperties": False}, "end": "</f>"}], "triggers": ["<f>"],
    "at_least_one": True, "stop_after_first": True}


@pytest.fixture(scope="module")
def engine(make_engine, tiny_llama_path):  # noqa: ANN001, ANN201
    return make_engine(tiny_llama_path, ebnf_max_recursion_depth=2)


def test_ebnf_outputs_match(engine) -> None:  # noqa: ANN001
    outs = engine.generate(["Do:"] * 4, [{"temperature": 1.0, "seed": s, "ebnf": COMMANDS,
                                          "max_new_tokens": 64} for s in range(4)])
    for o in outs:
        assert COMMAND_RE.fullmatch(o["text"]), o["text"]


def test_recursive_ebnf_nests_at_most_the_depth(engine) -> None:  # noqa: ANN001
    outs = engine.generate(["P:"] * 4, [{"temperature": 1.0, "seed": s, "ebnf": PARENS}
                                        for s in range(4)])
    assert {o["text"] for o in outs} <= {"x", "(x)", "((x))"}


def test_recursive_ebnf_refused_by_name_at_depth_zero(make_engine, tiny_llama_path) -> None:  # noqa: ANN001
    engine = make_engine(tiny_llama_path)
    with pytest.raises(GenerateError, match="rule 'root' is recursive"):
        engine.generate("x", {"ebnf": PARENS})
    assert engine.generate("x", {"max_new_tokens": 2})["text"] is not None


def test_structural_tag_outputs_are_one_valid_call(engine) -> None:  # noqa: ANN001
    outs = engine.generate(["Call:"] * 3, [{"temperature": 1.0, "seed": s,
                                            "structural_tag": json.dumps(TAG)}
                                           for s in range(3)])
    for o in outs:
        m = re.fullmatch(r"<f>(.*)</f>", o["text"], re.S)
        assert m and 0 <= json.loads(m.group(1))["n"] <= 9, o["text"]
