"""``@function``: signature checks, binding, argument errors, calling."""

from __future__ import annotations

import pytest

import radixlm as sgl


@sgl.function
def qa(s, question, prefix="Q: "):
    s += prefix + question + "\nA:" + sgl.gen("answer")


def test_the_first_parameter_must_be_s():
    with pytest.raises(TypeError, match="must be called 's'.*got state"):
        sgl.function(lambda state, q: None)
    with pytest.raises(TypeError, match="got nothing"):
        sgl.function(lambda: None)


def test_decorator_with_arguments():
    prog = sgl.function(num_api_spec_tokens=64)(lambda s: None)
    assert prog.num_api_spec_tokens == 64


def test_arguments_by_position_name_default_and_bind(scripted):
    assert qa.arg_names == ["question", "prefix"]
    assert qa.run("x?", backend=scripted).text().startswith("Q: x?\nA:")
    assert qa.run(question="y?", prefix="> ", backend=scripted).text().startswith("> y?")
    bound = qa.bind(prefix="Question: ")
    assert bound.run("z?", backend=scripted).text().startswith("Question: z?")
    with pytest.raises(TypeError, match="bind\\(\\): unknown argument\\(s\\) \\['nope'\\]"):
        qa.bind(nope=1)


def test_calling_the_function_runs_it(scripted):
    sgl.set_default_backend(scripted)
    try:
        assert qa("w?")["answer"].startswith("<")
    finally:
        sgl.global_config.default_backend = None


@pytest.mark.parametrize(("call", "message"), [
    (lambda b: qa.run(backend=b), "missing a required argument: 'question'"),
    (lambda b: qa.run("q", wrong=1, backend=b), "unexpected keyword argument 'wrong'"),
    (lambda b: qa.run("q", "p", "extra", backend=b), "too many positional arguments"),
    (lambda b: qa.run_batch([{"question": "a"}, {"q": "b"}], backend=b), "item 1"),
    (lambda b: qa.run_batch("not a list", backend=b), "batch_kwargs must be a list"),
])
def test_argument_errors_name_the_argument(scripted, call, message):
    with pytest.raises(TypeError, match=message):
        call(scripted)


def test_run_without_any_backend_says_how_to_set_one():
    sgl.global_config.default_backend = None
    with pytest.raises(ValueError, match="set_default_backend"):
        qa.run("q")


def test_compile_is_not_provided():
    with pytest.raises(NotImplementedError, match="run_batch"):
        qa.compile()
