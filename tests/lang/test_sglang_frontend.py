"""SGLang's own frontend test programs (``sglang/test/test_programs.py`` of the installed
sglang 0.5.23 wheel) against radixlm, unchanged but for their imports:

* SGLang's frontend (``sgl.RuntimeEndpoint(url)``) against a live ``radixlm serve``;
* the same program source with ``import sglang as sgl`` changed to ``import radixlm as sgl``,
  on radixlm's Engine (in-process) and on a radixlm Runtime.

The tiny test model answers nonsense, so each program has an expected outcome: ``PASS``, or
``ANSWER`` (only the program's check of the model's answer fails: an ``AssertionError`` or the
program's own parse/eval of the model's text). A framework error (a request refused, a backend
call failing inside the program's executor) fails the test either way.
"""

from __future__ import annotations

import types

import pytest
from sglang_harness import (
    ANSWER,
    PASS,
    import_programs,
    install_tokenizer_shim,
    programs_on_radixlm,
    run_program,
    run_refused,
)

programs = import_programs()
import sglang  # noqa: E402

import radixlm  # noqa: E402
from radixlm.lang.errors import ProgramError  # noqa: E402

# program -> (outcome on the tiny model, keyword arguments)
PROGRAMS = {
    "test_few_shot_qa": (ANSWER, {}),
    "test_mt_bench": (PASS, {}),
    "test_select": (PASS, {"check_answer": False}),
    "test_decode_int": (ANSWER, {}),
    # the JSON closes within max_tokens (close_within_max_tokens), so even the tiny model's
    # output parses and the program passes
    "test_decode_json_regex": (PASS, {}),
    "test_decode_json": (PASS, {}),
    "test_expert_answer": (ANSWER, {}),
    "test_tool_use": (ANSWER, {}),
    "test_react": (ANSWER, {}),
    "test_parallel_decoding": (PASS, {}),
    "test_stream": (PASS, {}),
    "test_regex": (PASS, {}),
    "test_dtype_gen": (PASS, {}),
    "test_gen_min_new_tokens": (PASS, {}),
}
# Programs run elsewhere or not at all, and why.
NOT_HERE = {
    "test_parallel_encoding": "needs /concate_and_append_request (KV splicing), which radixlm "
    "refuses with a 404 naming it; SGLang's frontend then blocks on its failed executor, "
    "with SGLang's own server too (test_parallel_encoding_is_refused_clearly); radixlm's "
    "frontend joins the branches' text (RADIXLM_PROGRAMS)",
    "test_stream_logprobs": "SGLang's frontend overwrites a streamed variable's meta_info per "
    "chunk, so a slow reader misses chunks' logprobs (a client race); the server contract is "
    "test_streamed_logprobs_are_per_chunk_deltas, and radixlm's frontend runs the program "
    "below",
    "test_image_qa": "needs a vision model: radixlm serves text models and refuses image_data "
    "by name (test_image_qa_is_refused_clearly); radixlm's frontend raises that refusal "
    "from state.messages() (test_image_qa_through_import_radixlm_as_sgl_is_refused_clearly)",
    "test_completion_speculative": "needs an API backend (OpenAI): RuntimeEndpoint has no "
    "speculative mode in SGLang either; sgl.OpenAI runs it on the real model "
    "(test_sglang_frontend_real_model.py)",
    "test_chat_completion_speculative": "needs an API backend (OpenAI), as above",
}


def test_every_program_of_the_wheel_is_accounted_for():
    names = {n for n in dir(programs) if n.startswith("test_")}
    assert names == set(PROGRAMS) | set(NOT_HERE)


def _run(module: types.ModuleType, name: str, expected: str, kwargs: dict) -> None:
    outcome, detail = run_program(module, name, kwargs)
    assert outcome == expected, f"{name}: expected {expected}, got {outcome} {detail}"


@pytest.fixture(scope="module")
def sglang_endpoint(tiny_server_url):
    endpoint = sglang.RuntimeEndpoint(tiny_server_url)
    # SGLang's Runtime (which starts SGLang's own server) is what its CI passes; a holder
    # with .endpoint is the same to its frontend and lets test_gen_min_new_tokens read it.
    sglang.set_default_backend(types.SimpleNamespace(endpoint=endpoint))
    yield endpoint
    sglang.global_config.default_backend = None


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_sglang_frontend_program_on_radixlm_serve(sglang_endpoint, monkeypatch, name):
    install_tokenizer_shim(monkeypatch)
    expected, kwargs = PROGRAMS[name]
    _run(programs, name, expected, kwargs)


def test_parallel_encoding_is_refused_clearly(sglang_endpoint):
    with pytest.raises(RuntimeError, match="concate_and_append_request.*not supported"):
        sglang_endpoint.concatenate_and_append(["a", "b"], "c")



def test_image_qa_is_refused_clearly(sglang_endpoint, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the program reads example_image.png's bytes in the cwd
    (tmp_path / "example_image.png").write_bytes(b"\x89PNG\r\n\x1a\n")  # refused unread
    raised, caught = run_refused(programs, "test_image_qa")
    assert raised.startswith("AssertionError"), raised  # the program got no answer
    refusals = [w for w in caught if "image_data" in w]
    assert refusals and "text-only" in refusals[0], caught





@pytest.fixture(scope="module", params=["engine", "runtime", "openai"])
def radixlm_backend(request, tiny_llama_path, tiny_server_url):
    if request.param == "engine":
        backend = radixlm.Engine(model_path=str(tiny_llama_path))
    elif request.param == "runtime":
        backend = radixlm.Runtime(model_path=tiny_llama_path)
    else:  # the official openai client against the live server, as a completion model
        backend = radixlm.OpenAI("default", base_url=tiny_server_url + "/v1",
                                 api_key="unused", is_chat_model=False)
    radixlm.set_default_backend(backend)
    yield backend
    radixlm.global_config.default_backend = None
    backend.shutdown()


def test_image_qa_through_import_radixlm_as_sgl_is_refused_clearly(radixlm_backend, tmp_path,
                                                                   monkeypatch):
    """The text-only refusal (the backend's, or the server's for image_data) reaches the
    program where it reads its answer: state.messages() of the failed program raises it
    (SGLang's frontend warns it and then fails the program's check)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "example_image.png").write_bytes(b"\x89PNG\r\n\x1a\n")
    with pytest.raises(ProgramError, match="no messages: the program failed with .*text-only"
                       ) as info:
        programs_on_radixlm(programs).test_image_qa()
    assert info.value.__cause__ is not None


# radixlm's frontend joins concate_and_append branches by text (no KV splicing needed).
RADIXLM_PROGRAMS = {**PROGRAMS, "test_stream_logprobs": (PASS, {}),
                    "test_parallel_encoding": (ANSWER, {})}


@pytest.mark.parametrize("name", list(RADIXLM_PROGRAMS))
def test_program_through_import_radixlm_as_sgl(radixlm_backend, monkeypatch, name):
    install_tokenizer_shim(monkeypatch)
    if name == "test_gen_min_new_tokens" and not hasattr(radixlm_backend, "endpoint"):
        # it reads default_backend.endpoint.get_model_name(): a Runtime's attribute
        pytest.skip("test_gen_min_new_tokens reads default_backend.endpoint (a Runtime)")
    expected, kwargs = RADIXLM_PROGRAMS[name]
    _run(programs_on_radixlm(programs), name, expected, kwargs)
