"""SGLang's own frontend test programs on the real model (SmolLM2-135M-Instruct) against
``radixlm serve`` (a radixlm ``Runtime``), and the same programs through ``import radixlm as
sgl`` on the Engine, the Runtime and ``sgl.OpenAI`` pointed at that server.

Every gen runs greedy (:func:`force_greedy`), so an answer is a function of the weights and
the prompt. Each program passes or fails only on the model's answer; for each that fails on
its answer, every request SGLang's frontend sent is checked against transformers on the same
GGUF (:mod:`transformers_oracle`): the model said that, radixlm did not.
"""

from __future__ import annotations

import re
import types

import pytest
from sglang_harness import (
    ANSWER,
    PASS,
    force_greedy,
    import_programs,
    install_tokenizer_shim,
    programs_on_radixlm,
    run_program,
    start_unjoined,
)
from transformers_oracle import Exchange, check_generate, mean_scores

programs = import_programs()
import sglang  # noqa: E402
import sglang.lang.backend.runtime_endpoint as sglang_endpoint_module  # noqa: E402

import radixlm  # noqa: E402
from radixlm.lang.backend.openai_backend import OpenAI  # noqa: E402

# program -> (outcome on the real model, greedy; keyword arguments)
REAL_PROGRAMS = {
    "test_few_shot_qa": (ANSWER, {}),  # "New York" for the capital of the United States
    "test_mt_bench": (PASS, {}),
    "test_select": (ANSWER, {"check_answer": True}),  # "False" for "Berlin is Germany's"
    "test_decode_int": (ANSWER, {}),  # "24000000..." hours in a day
    "test_decode_json_regex": (PASS, {}),
    "test_decode_json": (PASS, {}),
    "test_expert_answer": (ANSWER, {}),  # no "Paris"
    "test_tool_use": (PASS, {}),
    "test_react": (ANSWER, {}),
    "test_parallel_decoding": (PASS, {}),
    "test_stream": (PASS, {}),
    "test_regex": (PASS, {}),
    "test_dtype_gen": (PASS, {}),
    "test_gen_min_new_tokens": (PASS, {}),
}
# Passing programs that only exercise the framework (proved on the tiny model for every
# backend, test_sglang_frontend.py) and cost 10-35 s each on one CPU thread: -m slow.
SLOW = {"test_mt_bench", "test_decode_json_regex", "test_decode_json", "test_parallel_decoding",
        "test_stream", "test_dtype_gen", "test_gen_min_new_tokens"}
# Through radixlm's frontend too: the programs whose answer decides the outcome (react's
# many requests: -m slow), and two that pass.
ON_RADIXLM = ["test_few_shot_qa", "test_select", "test_expert_answer", "test_tool_use",
              "test_regex", "test_react"]


def _params(names, slow):  # noqa: ANN001, ANN202
    return [pytest.param(n, marks=pytest.mark.slow) if n in slow else n for n in names]


def _program_message(detail: str) -> str:
    """The program's own assertion message: without pytest's explanation (the wheel's test
    module is assertion-rewritten, the radixlm copy is not) and its indentation."""
    own = re.split(r"(?:^|\n)assert ", detail.split(": ", 1)[-1])[0]
    return "\n".join(line.strip() for line in own.splitlines())


@pytest.fixture(scope="module")
def runtime(real_model):
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RADIXLM_CACHE_DIR", str(real_model.cache_dir))  # the converted GGUF
        rt = radixlm.Runtime(model_path=real_model.gguf, max_total_tokens=8192,
                            quantization="none")
    yield rt
    rt.shutdown()


@pytest.fixture(scope="module", autouse=True)
def greedy():
    with pytest.MonkeyPatch.context() as mp:
        force_greedy(mp)
        yield


@pytest.fixture(scope="module")
def exchanges():
    """Every request SGLang's frontend sends (it calls http_request for each)."""
    seen: list[Exchange] = []
    original = sglang_endpoint_module.http_request

    def recording(url, json=None, stream=False, **kw):  # noqa: ANN001, ANN202
        res = original(url, json=json, stream=stream, **kw)
        if not stream and json is not None:
            try:
                body = res.json()
            except ValueError:
                body = None
            seen.append(Exchange(url, json, res.status_code, body))
        return res

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sglang_endpoint_module, "http_request", recording)
        yield seen


@pytest.fixture(scope="module")
def sglang_frontend(runtime, exchanges, real_model):
    endpoint = sglang.RuntimeEndpoint(runtime.url)
    sglang.set_default_backend(types.SimpleNamespace(endpoint=endpoint))
    yield endpoint
    sglang.global_config.default_backend = None


@pytest.fixture(scope="module")
def sglang_results(sglang_frontend, exchanges, real_model_hf, real_model_hf_tokenizer):
    """name -> (outcome, detail) of SGLang's frontend, each program run once, its requests
    checked against transformers when the program failed on its answer."""
    results: dict[str, tuple[str, str]] = {}

    def run(name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
        if name not in results:
            install_tokenizer_shim(monkeypatch, lambda _: real_model_hf_tokenizer)
            first = len(exchanges)
            results[name] = run_program(programs, name, REAL_PROGRAMS[name][1])
            if results[name][0] == ANSWER:
                sent = [e for e in exchanges[first:] if e.url.endswith("/generate")]
                assert sent and all(e.status == 200 for e in sent)
                checked = sum(check_generate(real_model_hf, real_model_hf_tokenizer, e)
                              for e in sent)
                assert checked > 0, f"{name}: no token was checked"
        return results[name]

    return run


@pytest.mark.parametrize("name", _params(REAL_PROGRAMS, SLOW))
def test_sglang_frontend_on_the_real_model(sglang_results, monkeypatch, name):
    outcome, detail = sglang_results(name, monkeypatch)
    assert outcome == REAL_PROGRAMS[name][0], f"{name}: got {outcome} {detail}"


def test_every_program_of_the_wheel_is_accounted_for():
    names = {n for n in dir(programs) if n.startswith("test_")}
    elsewhere = {"test_parallel_encoding", "test_image_qa", "test_stream_logprobs",
                 "test_completion_speculative", "test_chat_completion_speculative"}
    assert names == set(REAL_PROGRAMS) | elsewhere


def test_parallel_encoding_is_refused_by_name_never_a_hang(sglang_frontend, exchanges):
    """The server refuses /concate_and_append_request by name at once; SGLang's frontend
    then blocks on its failed executor (as with SGLang's own server), so the program runs
    on a daemon thread and the wait is bounded by polls for the server's answer."""
    first = len(exchanges)
    thread = start_unjoined(programs, "test_parallel_encoding")
    for _ in range(3000):  # a guard against a hang only: each poll waits at most 0.1 s
        refused = [e for e in exchanges[first:] if e.url.endswith("/concate_and_append_request")]
        if refused or not thread.is_alive():
            break
        thread.join(0.1)
    assert refused, "SGLang's frontend never asked for /concate_and_append_request"
    assert refused[0].status == 404
    assert "concate_and_append_request" in str(refused[0].response)
    assert "not supported" in str(refused[0].response)


@pytest.fixture(scope="module", params=["engine", "runtime", "openai"])
def radixlm_backend(request, real_model, runtime):
    if request.param == "engine":
        backend = radixlm.Engine(model_path=str(real_model.folder), max_total_tokens=8192,
                                 quantization="none")
    elif request.param == "runtime":
        backend = runtime
    else:  # the official openai client against the same live server, as a completion model
        backend = radixlm.OpenAI("default", base_url=runtime.url + "/v1", api_key="unused",
                                 is_chat_model=False)
    radixlm.set_default_backend(backend)
    yield backend
    radixlm.global_config.default_backend = None
    if request.param == "engine":
        backend.shutdown()


@pytest.mark.parametrize("name", _params(ON_RADIXLM, {"test_react"}))
def test_radixlm_frontend_gives_the_same_answers(radixlm_backend, sglang_results,
                                                 monkeypatch, name):
    outcome, detail = sglang_results(name, monkeypatch)
    ours, our_detail = run_program(programs_on_radixlm(programs), name, REAL_PROGRAMS[name][1])
    assert ours == outcome == REAL_PROGRAMS[name][0]
    assert _program_message(our_detail) == _program_message(detail)  # the same answer


def test_hellaswag_select_on_the_real_model(sglang_frontend, exchanges, real_model_hf,
                                            real_model_hf_tokenizer):
    """The shape of hellaswag_select (older SGLang's test_programs): few-shot contexts,
    select among four endings, run_batch with 64 threads; every select scored, and the
    ranking of every question's endings is transformers' ranking."""
    first = len(exchanges)
    states = pick_ending.run_batch(HELLASWAG, num_threads=64)
    picked = [s["ending"] for s in states]
    assert all(p in q["endings"] for p, q in zip(picked, HELLASWAG))
    scored = [e for e in exchanges[first:] if isinstance(e.body.get("text"), list)]
    assert len(scored) == len(HELLASWAG)
    for exchange in scored:
        ours, theirs = mean_scores(real_model_hf, real_model_hf_tokenizer, exchange)
        order = sorted(range(len(ours)), key=ours.__getitem__)
        assert order == sorted(range(len(theirs)), key=theirs.__getitem__), (ours, theirs)
    correct = sum(p == q["endings"][q["label"]] for p, q in zip(picked, HELLASWAG))
    print(f"hellaswag-shaped accuracy: {correct}/{len(HELLASWAG)}")


SHOTS = ("Baking: A woman cracks eggs into a bowl. She whisks them with sugar.\n\n"
         "Swimming: A boy jumps into the pool. He swims to the other side.\n\n"
         "Gardening: A man digs a hole in the yard. He plants a small tree in it.\n\n")
HELLASWAG = [
    {"context": "Cooking: A chef slices onions on a board. He",
     "endings": [" puts them in a hot pan.", " flies to the moon.",
                 " paints the board blue.", " sings to the onions."], "label": 0},
    {"context": "Running: A woman ties her shoes at the track. She",
     "endings": [" eats the shoes.", " starts running around the track.",
                 " falls asleep on the shoes.", " calls the track."], "label": 1},
    {"context": "Reading: A girl opens a book in the library. She",
     "endings": [" throws it in the lake.", " burns the library.",
                 " reads the first page quietly.", " rides the book."], "label": 2},
    {"context": "Cycling: A man gets on his bike. He",
     "endings": [" swallows the bike.", " melts.", " plants the bike.",
                 " pedals down the street."], "label": 3},
    {"context": "Mowing: A man pushes a mower across the lawn. The lawn",
     "endings": [" begins to sing.", " gets shorter as he goes.", " flies away.",
                 " turns into water."], "label": 1},
    {"context": "Painting: A boy dips a brush in red paint. He",
     "endings": [" paints a red circle on the paper.", " drinks the paint.",
                 " buries the brush.", " mails the paint."], "label": 0},
]


@sglang.function
def pick_ending(s, context, endings, label):
    s += SHOTS + context
    s += sglang.select("ending", choices=endings)


class CountingOpenAI(OpenAI):
    """sgl.OpenAI that counts the requests it sends (each still goes to the live server)."""

    requests = 0

    def _create(self, body):  # noqa: ANN001, ANN202
        self.requests += 1
        return super()._create(body)


@pytest.fixture(params=[False, True], ids=["completion", "chat"])
def api_backend(request, runtime):
    backend = CountingOpenAI("default", base_url=runtime.url + "/v1", api_key="unused",
                             is_chat_model=request.param)
    radixlm.set_default_backend(backend)
    yield backend
    radixlm.global_config.default_backend = None


def test_speculative_program_of_the_wheel(api_backend):
    """SGLang's completion_speculative (fewer prompt tokens with num_api_spec_tokens than
    without) on a completion model, chat_completion_speculative on a chat model."""
    name = ("test_chat_completion_speculative" if api_backend.is_chat_model
            else "test_completion_speculative")
    assert run_program(programs_on_radixlm(programs), name, {}) == (PASS, "")


@radixlm.function(num_api_spec_tokens=64)
def character(s):
    s += radixlm.system("You are a helpful assistant.")
    s += radixlm.user("Write a character card in exactly this format:\nName: ...\n"
                      "Birthday: ...\nJob: ...")
    s += radixlm.assistant("Name:" + radixlm.gen("name", stop="\n") + "\nBirthday:"
                           + radixlm.gen("birthday", stop="\n") + "\nJob:"
                           + radixlm.gen("job", stop="\n"))


@radixlm.function(num_api_spec_tokens=64)
def character_completion(s):
    s += "Construct a character within the following format:\nName: Steve Jobs.\n"
    s += "Birthday: February 24, 1955.\nJob: Apple CEO.\n\nPlease generate new Name, "
    s += "Birthday and Job.\nName:" + radixlm.gen("name", stop="\n")
    s += "\nBirthday:" + radixlm.gen("birthday", stop="\n")
    s += "\nJob:" + radixlm.gen("job", stop="\n")


def test_speculation_answers_the_gens_with_one_request(api_backend):
    """The greedy answer follows the pattern (chat: 'Name: John Smith\nBirthday: ...';
    completion: the example again), so one request fills all three gens."""
    program = character if api_backend.is_chat_model else character_completion
    state = program.run()
    values = [state["name"], state["birthday"], state["job"]]
    assert api_backend.requests == 1, "the three gens share the one speculated answer"
    assert all(v.strip() and "\n" not in v for v in values), values
    assert f"Name:{values[0]}\nBirthday:{values[1]}\nJob:{values[2]}" in state.text()
