"""Tracing (SGLang's test_tracing.py semantics) and constant-prefix extraction."""

from __future__ import annotations

import pytest

import radixlm as sgl
from radixlm.lang.backend.base import BaseBackend
from radixlm.lang.chat_template import get_chat_template
from radixlm.lang.ir import SglConstantText, SglGen, SglSelect
from radixlm.lang.tracer import extract_prefix_by_tracing


@sgl.function
def few_shot_qa(s, question):
    s += "The following are questions with answers.\n\n"
    s += "Q: What is the capital of France?\n"
    s += "A: Paris\n"
    s += "Q: " + question + "\n"
    s += "A:" + sgl.gen("answer", stop="\n")


def test_trace_records_constants_arguments_and_gens():
    tracer = few_shot_qa.trace()
    kinds = [type(n).__name__ for n in tracer.flatten_nodes()]
    assert kinds == ["SglConstantText"] * 4 + ["SglArgument", "SglConstantText",
                                                "SglConstantText", "SglGen"]
    graph = tracer.last_node.print_graph_dfs()
    assert "Gen('answer')" in graph and "Argument(name=question" in graph


def test_trace_select_and_reading_a_variable():
    @sgl.function
    def capital(s):
        s += "The capital of France is"
        s += sgl.select("capital", ["Paris. ", "London. "])
        s += "It is a city" + sgl.gen("description", stop=".") + s["capital"]

    tracer = capital.trace()
    nodes = tracer.flatten_nodes()
    assert isinstance(nodes[1], SglSelect) and isinstance(nodes[3], SglGen)
    assert nodes[-1].name == "capital"  # the variable node stands for the select's value


def test_fstring_over_an_argument_raises_type_error():
    @sgl.function
    def wrong(s, question):
        s += f"I want to ask {question}"

    with pytest.raises(TypeError, match="f-string"):
        wrong.trace()


def test_trace_forks_and_nested_functions():
    @sgl.function
    def expand(s, tip):
        s += "Expand: " + tip + "\n" + sgl.gen("detail")

    @sgl.function
    def tips(s):
        s += "Tips:\n1." + sgl.gen("tip_1", stop="\n")
        branch = expand(tip=s["tip_1"], temperature=0)
        forks = s.fork(2)
        for i in range(2):
            forks[i] += f"Now expand tip {i + 1}:" + sgl.gen("detailed_tip")
        s += "Summary: " + forks[0]["detailed_tip"] + branch["detail"]

    tracer = tips.trace()
    assert len(tracer.child_states) == 1 + 2  # the nested trace and the two branches
    assert "Fork(" in tracer.last_node.print_graph_dfs()


def test_roles_trace_to_template_text():
    backend = BaseBackend()
    backend.chat_template = get_chat_template("llama-3-instruct")

    @sgl.function
    def chat(s):
        s += sgl.user("Who are you?")
        s += sgl.assistant(sgl.gen("answer_1"))

    texts = [n.value for n in chat.trace(backend=backend).flatten_nodes()
             if isinstance(n, SglConstantText)]
    assert texts[:3] == ["<|start_header_id|>user<|end_header_id|>\n\n", "Who are you?",
                         "<|eot_id|>"]


def _argument(s, q):
    s += "A long constant header. "
    s += q + " tail"


def _str_of_argument(s, q):
    s += "x"
    s += "y" + str(q)  # str() of a placeholder raises TypeError: the prefix ends before it


def _fork_first(s, q):
    s.fork(2)


def _gen_first(s, q):
    s += sgl.gen("a") + "never"


@pytest.mark.parametrize(("body", "prefix"), [
    (_argument, "A long constant header. "), (_str_of_argument, "x"), (_fork_first, ""),
    (_gen_first, ""),
])
def test_prefix_extraction_stops_at_the_first_non_constant(body, prefix):
    assert extract_prefix_by_tracing(sgl.function(body), None) == prefix


def test_prefix_extraction_uses_bound_arguments():
    bound = few_shot_qa.bind(question="What is 2+2?")
    assert extract_prefix_by_tracing(bound, None).endswith("Q: What is 2+2?\nA:")
