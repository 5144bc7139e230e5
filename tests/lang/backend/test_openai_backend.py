"""``sgl.OpenAI`` over the official ``openai`` client against a live ``radixlm serve`` (the
tiny model; never a mock), as a completion model and as a chat model."""

from __future__ import annotations

import json

import pytest

import radixlm as sgl
from radixlm.lang.errors import ProgramError


@pytest.fixture(scope="module")
def model_name(tiny_server_url):
    import requests

    return requests.get(tiny_server_url + "/v1/models").json()["data"][0]["id"]


@pytest.fixture(scope="module", params=[False, True], ids=["completion", "chat"])
def backend(request, tiny_server_url, model_name):
    return sgl.OpenAI(model_name, base_url=tiny_server_url + "/v1", api_key="unused",
                      is_chat_model=request.param)


@sgl.function
def completion_program(s):
    s += "Q: Is the sky green?\nA:" + sgl.gen("free", max_tokens=6, stop="\n")
    s += "\nYear: " + sgl.gen("year", regex="(19|20)[0-9]{2}")
    s += "\nAnswer: " + sgl.select("yes_no", choices=["yes", "no", "maybe not"])
    s += "\nJSON: " + sgl.gen("obj", max_tokens=40, json_schema=json.dumps({
        "type": "object", "properties": {"n": {"type": "boolean"}}, "required": ["n"],
        "additionalProperties": False}))


@sgl.function
def chat_program(s):
    s += sgl.user("Pick a year.")
    s += sgl.assistant(sgl.gen("year", regex="(19|20)[0-9]{2}", max_tokens=8))
    s += sgl.user("Yes or no?")
    s += sgl.assistant(sgl.select("yes_no", choices=["yes", "no", "maybe not"]))
    s += sgl.user("Free text.")
    s += sgl.assistant(sgl.gen("free", max_tokens=5, temperature=0.7))


def test_program_runs(backend):
    program = chat_program if backend.is_chat_model else completion_program
    state = program.run(backend=backend, temperature=0)
    assert 1900 <= int(state["year"]) <= 2099
    assert state["yes_no"] in ("yes", "no", "maybe not")
    assert "\n" not in state["free"]
    if not backend.is_chat_model:
        assert isinstance(json.loads(state["obj"])["n"], bool)
        meta = state.get_meta_info("yes_no")  # scored from echo + prompt logprobs
        assert len(meta["input_token_logprobs"]) == 3
        assert all(v is not None and v < 0 for row in meta["input_token_logprobs"]
                   for v, _, _ in row)
    else:
        assert state.get_meta_info("yes_no")["select_method"] == "constrained generation"


def test_select_scores_match_the_native_server(tiny_server_url, model_name):
    """Completion-model select by logprobs decides as the native endpoint's select does."""
    choices = ["yes", "no", "maybe not"]

    @sgl.function
    def ask(s):
        s += "Question: is water wet?\nAnswer:" + sgl.select("a", choices=choices)

    api = ask.run(backend=sgl.OpenAI(model_name, base_url=tiny_server_url + "/v1",
                                     api_key="unused", is_chat_model=False))
    native = ask.run(backend=sgl.RuntimeEndpoint(tiny_server_url))
    assert api["a"] == native["a"]
    assert api.get_meta_info("a")["normalized_prompt_logprobs"] == pytest.approx(
        native.get_meta_info("a")["normalized_prompt_logprobs"], rel=1e-4)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_gen_logprobs_match_the_native_server(backend, tiny_server_url, stream):
    """return_logprob: meta info's output_token_logprobs in the native shape, the same
    values as the native endpoint's for the same greedy answer (token ids: the API has
    none); streamed, the program state holds them whole."""

    @sgl.function
    def lp(s):
        if backend.is_chat_model:
            s += sgl.user("Say something.")
            s += sgl.assistant(sgl.gen("a", max_tokens=6, return_logprob=True,
                                       top_logprobs_num=2, return_text_in_logprobs=True))
        else:
            s += "Say something:" + sgl.gen("a", max_tokens=6, return_logprob=True,
                                            top_logprobs_num=2, return_text_in_logprobs=True)

    api = lp.run(backend=backend, temperature=0, stream=stream)
    assert api.error() is None
    native = lp.run(backend=sgl.RuntimeEndpoint(tiny_server_url), temperature=0)
    assert api["a"] == native["a"]
    got, want = api.get_meta_info("a"), native.get_meta_info("a")
    assert want["output_token_logprobs"], "the answer has tokens to compare"
    assert [e[1] for e in got["output_token_logprobs"]] == [None] * len(want[
        "output_token_logprobs"])
    assert [(e[0], e[2]) for e in got["output_token_logprobs"]] == [
        (pytest.approx(e[0], rel=1e-4, abs=1e-5), e[2]) for e in want["output_token_logprobs"]]
    assert got["output_token_logprobs_length"] == got["completion_tokens"] == len(
        want["output_token_logprobs"])
    assert [len(top) for top in got["output_top_logprobs"]] == [2] * len(
        want["output_top_logprobs"])


def test_streaming_gen(backend):
    program = chat_program if backend.is_chat_model else completion_program
    state = program.run(backend=backend, temperature=0, stream=True)
    pieces = list(state.text_iter("free"))
    assert "".join(pieces) == state["free"]


def test_server_refusals_name_the_field(backend):
    @sgl.function
    def one(s):
        if backend.is_chat_model:
            s += sgl.user("x")
            s += sgl.assistant(sgl.gen("y", max_tokens=2, stop_regex="("))
        else:
            s += "x" + sgl.gen("y", max_tokens=2, stop_regex="(")

    with pytest.raises(Exception, match="stop_regex"):
        one.run(backend=backend)["y"]


def test_stop_regex_travels_as_an_extension(backend):
    @sgl.function
    def one(s):
        if backend.is_chat_model:
            s += sgl.user("x")
            s += sgl.assistant(sgl.gen("y", max_tokens=20, stop_regex="[0-9]"))
        else:
            s += "x" + sgl.gen("y", max_tokens=20, stop_regex="[0-9]")

    assert not any(ch.isdigit() for ch in one.run(backend=backend, temperature=0)["y"])


@sgl.function
def partial_assistant(s):
    s += sgl.user("Name a city.")
    s += sgl.assistant("The city is" + sgl.gen("city", max_tokens=4))


@sgl.function
def no_assistant(s):
    s += sgl.user("Name a city." + sgl.gen("city", max_tokens=4))


@pytest.mark.parametrize("program", [partial_assistant, no_assistant],
                         ids=["after-text-in-the-message", "outside-an-assistant-message"])
def test_chat_model_gets_finished_messages_only(tiny_server_url, model_name, program):
    """A chat model answers whole messages: a gen that would continue a partial assistant
    message (or answer no assistant message) is refused before any request is sent."""
    backend = sgl.OpenAI(model_name, base_url=tiny_server_url + "/v1", api_key="unused",
                         is_chat_model=True)
    state = program.run(backend=backend)
    with pytest.raises(ProgramError, match="right after sgl.assistant begins"):
        state["city"]
    assert "num_api_spec_tokens" in str(state.error())
    assert backend.token_usage.prompt_tokens == 0  # nothing was sent
