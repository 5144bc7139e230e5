"""The public constructors: what they build and how they refuse bad arguments."""

from __future__ import annotations

import json

import pydantic
import pytest

import radixlm as sgl
from radixlm.lang.ir import SglExprList, SglGen, SglRoleBegin, SglRoleEnd, SglSelect


def test_sglang_names_are_exported():
    for name in ("function", "gen", "gen_int", "gen_string", "select", "image", "video",
                 "system", "user", "assistant", "system_begin", "system_end", "user_begin",
                 "user_end", "assistant_begin", "assistant_end", "set_default_backend",
                 "flush_cache", "get_server_info", "Runtime", "Engine", "RuntimeEndpoint",
                 "token_length_normalized", "greedy_token_selection",
                 "unconditional_likelihood_normalized", "global_config", "__version__"):
        assert getattr(sgl, name) is not None, name
    from radixlm.runtime.api.engine import Engine

    assert sgl.Engine is Engine


def test_import_radixlm_stays_light():
    import subprocess
    import sys

    code = ("import sys, radixlm; heavy = [m for m in ('torch', 'transformers', 'requests') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_gen_maps_sglang_names_to_sampling_params():
    node = sgl.gen("x", 16, min_tokens=2, stop=["\n"], temperature=0.5, top_k=4,
                   return_logprob=True)
    assert isinstance(node, SglGen) and node.name == "x"
    p = node.sampling_params
    assert (p.max_new_tokens, p.min_new_tokens, p.stop, p.temperature, p.top_k) == \
        (16, 2, ["\n"], 0.5, 4)
    assert p.top_p is None, "unset fields inherit from the program"
    assert sgl.gen_int("n").sampling_params.dtype is int
    assert sgl.gen_string("t").sampling_params.dtype is str


def test_gen_with_choices_is_a_select():
    node = sgl.gen("pick", choices=["a", "b"], choices_method=sgl.greedy_token_selection)
    assert isinstance(node, SglSelect)
    assert node.choices == ["a", "b"] and node.temperature == 0.0
    assert node.choices_method is sgl.greedy_token_selection


class City(pydantic.BaseModel):
    name: str
    population: int


@pytest.mark.parametrize("schema", [City, City.model_json_schema(),
                                    json.dumps(City.model_json_schema())])
def test_json_schema_accepts_pydantic_dicts_and_strings(schema):
    sent = sgl.gen("j", json_schema=schema).sampling_params.json_schema
    assert json.loads(sent) == City.model_json_schema()


@pytest.mark.parametrize(("call", "argument"), [
    (lambda: sgl.gen("x", max_tokens="ten"), "max_tokens"),
    (lambda: sgl.gen("x", max_tokens=-3), "max_tokens"),
    (lambda: sgl.gen("x", temperature="hot"), "temperature"),
    (lambda: sgl.gen("x", stop=5), "stop"),
    (lambda: sgl.gen("x", regex="([a-z"), "regex"),
    (lambda: sgl.gen("x", dtype=list), "dtype"),
    (lambda: sgl.gen("x", json_schema=3), "json_schema"),
    (lambda: sgl.gen("x", json_schema="{not json"), "json_schema"),
    (lambda: sgl.gen("x", ebnf=3), "ebnf"),
    (lambda: sgl.gen(3), "name"),
    (lambda: sgl.gen("x", choices_method=sgl.token_length_normalized), "choices_method"),
    (lambda: sgl.select("x", choices=[]), "choices"),
    (lambda: sgl.select("x", choices=None), "choices"),
    (lambda: sgl.select("x", choices=["a", ""]), "choices"),
    (lambda: sgl.select("x", choices=["a"], temperature=0.7), "temperature"),
    (lambda: sgl.select("x", choices=["a"], choices_method="mean"), "choices_method"),
])
def test_bad_arguments_name_the_argument(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()


def test_roles_wrap_their_content():
    node = sgl.user("hi")
    assert isinstance(node, SglExprList)
    begin, text, end = node.expr_list
    assert isinstance(begin, SglRoleBegin) and isinstance(end, SglRoleEnd)
    assert begin.role == end.role == "user" and text.value == "hi"
    assert sgl.assistant_begin().role == "assistant" and sgl.system_end().role == "system"


@pytest.mark.parametrize("name", ["Anthropic", "LiteLLM", "VertexAI"])
def test_api_backends_not_shipped_say_so(name):
    # (OpenAI is shipped: tests/lang/backend/test_openai_backend.py)
    with pytest.raises(NotImplementedError, match="RuntimeEndpoint"):
        getattr(sgl, name)("some-model")


def test_helpers_without_a_backend():
    sgl.global_config.default_backend = None
    assert sgl.flush_cache() is False
    assert sgl.get_server_info() is None


def test_ebnf_is_sent_as_the_sampling_param():
    grammar = 'root ::= "yes" | "no"'
    body = sgl.gen("a", ebnf=grammar).sampling_params.to_request()
    assert body["sampling_params"]["ebnf"] == grammar
