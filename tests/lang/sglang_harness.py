"""Running SGLang's own frontend test programs (``sglang/test/test_programs.py`` of the
installed sglang 0.5.23 wheel) and telling a framework error from a wrong answer.

Shared by the tiny-model run (``test_sglang_frontend.py``) and the real-model run
(``test_sglang_frontend_real_model.py``)."""

from __future__ import annotations

import json
import sys
import threading
import types
import warnings
from pathlib import Path
from typing import Any

import pytest

PASS, ANSWER = "pass", "answer"
# The model's text fed to the program's own checks: int()/json.loads()/eval() fail on it.
ANSWER_ERRORS = (AssertionError, json.JSONDecodeError, SyntaxError, NameError, ValueError,
                 TypeError, KeyError)


def import_programs() -> types.ModuleType:
    """``sglang.test.test_programs``, or a skip that says how to install SGLang's frontend."""
    pytest.importorskip("sglang", reason="SGLang's frontend is a test dependency: pip "
                        "install --no-deps sglang==0.5.23 (the README's test command does)")
    return pytest.importorskip("sglang.test.test_programs")


def install_tokenizer_shim(monkeypatch: pytest.MonkeyPatch, get_tokenizer: Any = None) -> None:
    """test_gen_min_new_tokens imports SGLang's server-side tokenizer helper, whose package
    pulls torchvision and SGLang's model configs; the frontend never needs them."""
    try:
        import sglang.srt.utils.hf_transformers_utils  # noqa: F401
    except ImportError:
        from transformers import AutoTokenizer

        shim = types.ModuleType("sglang.srt.utils.hf_transformers_utils")
        shim.get_tokenizer = get_tokenizer or AutoTokenizer.from_pretrained
        monkeypatch.setitem(sys.modules, shim.__name__, shim)


def run_program(module: types.ModuleType, name: str, kwargs: dict) -> tuple[str, str]:
    """(PASS or ANSWER, the answer check's message); a framework error fails the test."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            getattr(module, name)(**kwargs)
            outcome, detail = PASS, ""
        except ANSWER_ERRORS as exc:
            outcome, detail = ANSWER, f"{type(exc).__name__}: {str(exc)[:300]}"
    framework = [str(w.message) for w in caught if "stream_executor" in str(w.message)]
    assert not framework, f"{name}: framework error inside the program: {framework[0][-1500:]}"
    return outcome, detail


def run_refused(module: types.ModuleType, name: str) -> tuple[str, list[str]]:
    """Run a program whose request the server refuses: (what the program raised, the
    executor's warnings, which carry the server's error)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            getattr(module, name)()
            raised = "nothing"
        except Exception as exc:  # noqa: BLE001 - reported to the test
            raised = f"{type(exc).__name__}: {exc}"
    return raised, [str(w.message) for w in caught]


def start_unjoined(module: types.ModuleType, name: str) -> threading.Thread:
    """Start a program that SGLang's frontend may block forever, on a daemon thread (the
    caller bounds its wait by what the server saw, never by time alone)."""
    thread = threading.Thread(target=getattr(module, name), daemon=True, name=f"sgl-{name}")
    thread.start()
    return thread


def programs_on_radixlm(programs: types.ModuleType) -> types.ModuleType:
    """The wheel's program source with only its imports changed to radixlm."""
    source = Path(programs.__file__).read_text()
    assert "import sglang as sgl" in source
    module = types.ModuleType("radixlm_test_programs")
    exec(compile(source.replace("import sglang as sgl", "import radixlm as sgl"),
                 programs.__file__, "exec"), module.__dict__)
    return module


def force_greedy(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every gen of both frontends at temperature 0: the programs' own temperatures
    (0.1-1.0) would make answers draws; greedy makes each answer a function of the weights
    and the prompt, so transformers can check it."""
    from sglang.lang.interpreter import StreamExecutor as SglExecutor

    from radixlm.lang.interpreter import StreamExecutor

    for cls, attr in ((SglExecutor, "_resolve_sampling_params"),
                      (StreamExecutor, "resolve_sampling_params")):
        original = getattr(cls, attr)

        def greedy(self, params, _original=original):  # noqa: ANN001, ANN202
            out = _original(self, params)
            out.temperature = 0
            return out

        monkeypatch.setattr(cls, attr, greedy)
