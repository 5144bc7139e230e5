"""The interpreter on a scripted backend: text, variables, roles, errors, cancellation."""

from __future__ import annotations

import threading

import pytest

import radixlm as sgl
from radixlm.lang.backend.base import BaseBackend
from radixlm.lang.chat_template import get_chat_template
from radixlm.lang.errors import ProgramError


def test_text_and_variables_accumulate_in_order(scripted):
    @sgl.function
    def prog(s, topic):
        s += "Topic: " + topic + "\n"
        s += "A:" + sgl.gen("a") + "\n"
        s += "B:" + sgl.gen() + "|" + s["a"]

    state = prog.run("cats", backend=scripted)
    a = state["a"]
    before_a = "Topic: cats\nA:"
    assert a == f"<{len(before_a)}>"  # the scripted reply: the length of the text so far
    before_b = f"{before_a}{a}\nB:"
    assert state.text() == f"{before_b}<{len(before_b)}>|{a}"
    assert "a" in state and "b" not in state
    assert [kind for kind, _ in scripted.calls] == ["gen", "gen"]


def test_sampling_params_resolve_field_by_field(scripted):
    seen = []
    scripted.reply = lambda text, params: seen.append(params) or "x"

    @sgl.function
    def prog(s):
        s += "q" + sgl.gen("a", max_tokens=5) + sgl.gen("b", temperature=0.0, stop=".")

    prog.run(backend=scripted, temperature=0.3, stop="\n").sync()
    assert (seen[0].max_new_tokens, seen[0].temperature, seen[0].stop_list()) == \
        (5, 0.3, ["\n"])
    assert (seen[1].max_new_tokens, seen[1].temperature, seen[1].stop_list()) == \
        (128, 0.0, ["."])


def test_var_scope_captures_everything_appended_inside(scripted):
    @sgl.function
    def prog(s):
        s += "before "
        with s.var_scope("obj"):
            s += "{" + sgl.gen("v") + "}"
        s += " after"

    state = prog.run(backend=scripted)
    assert state["obj"] == f"{{<{len('before {')}>}}"
    assert state.text() == f"before {state['obj']} after"


def test_roles_use_the_template_and_fill_messages(scripted):
    scripted.chat_template = get_chat_template("qwen")  # has a default system prompt

    @sgl.function
    def chat(s, q):
        s += sgl.user(q)
        s += sgl.assistant(sgl.gen("a"))
        with s.user():
            s += "more"

    state = chat.run("hi", backend=scripted)
    text = state.text()
    assert text.startswith("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                           "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")
    assert [m["role"] for m in state.messages()] == ["system", "user", "assistant", "user"]
    assert state.messages()[2]["content"] == state["a"]
    assert state.messages()[3] == {"role": "user", "content": "more"}


def test_chat_stop_strings_are_added_to_every_gen(scripted):
    scripted.chat_template = get_chat_template("chatml")
    seen = []
    scripted.reply = lambda text, params: seen.append(params.stop) or ""

    @sgl.function
    def prog(s):
        s += sgl.gen("a", stop="\n")

    prog.run(backend=scripted).sync()
    assert seen == [["\n", "<|im_end|>"]]


def test_nested_roles_fail_the_program(scripted):
    @sgl.function
    def prog(s):
        s += sgl.user_begin()
        s += sgl.assistant_begin()
        s += sgl.gen("x")

    state = prog.run(backend=scripted)
    with pytest.raises(ProgramError, match="roles do not nest"):
        state["x"]
    assert isinstance(state.error(), ValueError)


def test_a_failing_node_stops_the_program_and_wakes_readers(scripted):
    def reply(text, params):
        if "boom" in text:
            raise RuntimeError("server said no")
        return "ok"

    scripted.reply = reply

    @sgl.function
    def prog(s):
        s += sgl.gen("a") + " boom" + sgl.gen("b") + sgl.gen("c")

    state = prog.run(backend=scripted)
    assert state["a"] == "ok"
    with pytest.raises(ProgramError, match="server said no") as info:
        state["c"]
    assert isinstance(info.value.__cause__, RuntimeError)
    assert len(scripted.calls) == 2, "nodes after the failure must be skipped"
    assert state.text() == "ok boom"
    with pytest.raises(ProgramError, match="no messages: .*server said no") as info:
        state.messages()  # the chat stops before the failed gen: never read as the answer
    assert info.value.__cause__ is state.error()


def test_unknown_variable_and_bad_expression_are_named(scripted):
    @sgl.function
    def prog(s):
        s += "x"

    state = prog.run(backend=scripted)
    with pytest.raises(KeyError, match="nope"):
        state["nope"]
    with pytest.raises(TypeError, match="int"):
        state += 5
    with pytest.raises(ValueError, match="None"):
        state += None


class GatedBackend(BaseBackend):
    """A gen stays in flight until aborted; records the aborted request ids."""

    def __init__(self) -> None:
        super().__init__()
        self.started = threading.Event()
        self.released = threading.Event()
        self.aborted: list[str] = []

    def generate(self, s, sampling_params):
        rid = s.new_rid()
        with s.requests_in_flight([rid]):
            self.started.set()
            assert self.released.wait(10), "the request was never aborted"
        return "", {"finish_reason": {"type": "abort"}}

    def abort(self, rids):
        self.aborted += rids
        self.released.set()


def test_a_program_that_raises_aborts_its_request_in_flight():
    backend = GatedBackend()

    @sgl.function
    def prog(s):
        s += "x" + sgl.gen("a") + sgl.gen("b")
        assert backend.started.wait(10)
        raise ValueError("the program's own bug")

    with pytest.raises(ValueError, match="own bug"):
        prog.run(backend=backend)
    assert len(backend.aborted) == 1 and backend.aborted[0].endswith("-1")


def test_image_on_a_text_model_is_refused_clearly(scripted):
    @sgl.function
    def prog(s):
        s += sgl.user(sgl.image("cat.png") + "What is this?")
        s += sgl.gen("a")

    state = prog.run(backend=scripted)
    with pytest.raises(ProgramError, match="text-only model"):
        state["a"]
