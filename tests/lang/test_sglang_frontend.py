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

import json
import sys
import types
import warnings
from pathlib import Path

import pytest

sglang = pytest.importorskip(
    "sglang", reason="SGLang's frontend is a test dependency: pip install --no-deps "
    "sglang==0.5.23 (the README's test command and .ci/run do)")
programs = pytest.importorskip("sglang.test.test_programs")

import radixlm  # noqa: E402

PASS, ANSWER = "pass", "answer"
# The model's text fed to the program's own checks: int()/json.loads()/eval() fail on it.
ANSWER_ERRORS = (AssertionError, json.JSONDecodeError, SyntaxError, NameError, ValueError,
                 TypeError, KeyError)
# program -> (outcome on the tiny model, keyword arguments)
PROGRAMS = {
    "test_few_shot_qa": (ANSWER, {}),
    "test_mt_bench": (PASS, {}),
    "test_select": (PASS, {"check_answer": False}),
    "test_decode_int": (ANSWER, {}),
    "test_decode_json_regex": (ANSWER, {}),
    "test_decode_json": (ANSWER, {}),
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
    "refuses with a 404 naming it (test_parallel_encoding_is_refused_clearly); SGLang's "
    "frontend then waits forever on its dead executor, with SGLang's own server too",
    "test_stream_logprobs": "SGLang's frontend overwrites a streamed variable's meta_info per "
    "chunk, so a slow reader misses chunks' logprobs (a client race); the server contract is "
    "test_streamed_logprobs_are_per_chunk_deltas, and radixlm's frontend runs the program "
    "below",
    "test_image_qa": "needs a vision model; radixlm serves text models and refuses image_data",
    "test_completion_speculative": "needs an API backend (OpenAI): RuntimeEndpoint has no "
    "speculative mode in SGLang either",
    "test_chat_completion_speculative": "needs an API backend (OpenAI), as above",
}


def test_every_program_of_the_wheel_is_accounted_for():
    names = {n for n in dir(programs) if n.startswith("test_")}
    assert names == set(PROGRAMS) | set(NOT_HERE)


def _install_tokenizer_shim(monkeypatch) -> None:
    """test_gen_min_new_tokens imports SGLang's server-side tokenizer helper, whose package
    pulls torchvision and SGLang's model configs; the frontend never needs them."""
    try:
        import sglang.srt.utils.hf_transformers_utils  # noqa: F401
    except ImportError:
        from transformers import AutoTokenizer

        shim = types.ModuleType("sglang.srt.utils.hf_transformers_utils")
        shim.get_tokenizer = AutoTokenizer.from_pretrained
        monkeypatch.setitem(sys.modules, shim.__name__, shim)


def _run(module: types.ModuleType, name: str, expected: str, kwargs: dict) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            getattr(module, name)(**kwargs)
            outcome, detail = PASS, ""
        except ANSWER_ERRORS as exc:
            outcome, detail = ANSWER, f"{type(exc).__name__}: {str(exc)[:200]}"
    framework = [str(w.message) for w in caught if "stream_executor" in str(w.message)]
    assert not framework, f"{name}: framework error inside the program: {framework[0][-1500:]}"
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
    _install_tokenizer_shim(monkeypatch)
    expected, kwargs = PROGRAMS[name]
    _run(programs, name, expected, kwargs)


def test_parallel_encoding_is_refused_clearly(sglang_endpoint):
    with pytest.raises(RuntimeError, match="concate_and_append_request.*not supported"):
        sglang_endpoint.concatenate_and_append(["a", "b"], "c")


def _programs_on_radixlm() -> types.ModuleType:
    """The wheel's program source with only its imports changed to radixlm."""
    source = Path(programs.__file__).read_text()
    assert "import sglang as sgl" in source
    module = types.ModuleType("radixlm_test_programs")
    exec(compile(source.replace("import sglang as sgl", "import radixlm as sgl"),
                 programs.__file__, "exec"), module.__dict__)
    return module


@pytest.fixture(scope="module", params=["engine", "runtime"])
def radixlm_backend(request, tiny_llama_path):
    if request.param == "engine":
        backend = radixlm.Engine(model_path=str(tiny_llama_path))
    else:
        backend = radixlm.Runtime(model_path=tiny_llama_path)
    radixlm.set_default_backend(backend)
    yield backend
    radixlm.global_config.default_backend = None
    backend.shutdown()


RADIXLM_PROGRAMS = {**PROGRAMS, "test_stream_logprobs": (PASS, {})}


@pytest.mark.parametrize("name", list(RADIXLM_PROGRAMS))
def test_program_through_import_radixlm_as_sgl(radixlm_backend, monkeypatch, name):
    _install_tokenizer_shim(monkeypatch)
    if name == "test_gen_min_new_tokens" and not hasattr(radixlm_backend, "endpoint"):
        # it reads default_backend.endpoint.get_model_name(): a Runtime's attribute
        pytest.skip("test_gen_min_new_tokens reads default_backend.endpoint (a Runtime)")
    expected, kwargs = RADIXLM_PROGRAMS[name]
    _run(_programs_on_radixlm(), name, expected, kwargs)
