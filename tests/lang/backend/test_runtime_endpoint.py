"""RuntimeEndpoint against the real radixlm HTTP server (started by Runtime), against a
minimal server that only knows upstream's new route names, and against nothing."""

from __future__ import annotations

import json
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests

import radixlm as sgl
from radixlm.lang.backend import select_scoring
from radixlm.lang.backend.runtime_endpoint import RuntimeEndpoint, RuntimeEndpointError
from radixlm.lang.errors import ProgramError
from radixlm.runtime.wire.ipc import free_tcp_port

API_KEY = "test-key"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def runtime(tiny_llama_path):
    rt = sgl.Runtime(model_path=tiny_llama_path, api_key=API_KEY)
    pid = rt.pid
    yield rt
    rt.shutdown()
    assert not _alive(pid), "shutdown must stop the server process"


def _post(rt, body):
    res = requests.post(rt.url + "/generate", json=body,
                        headers={"Authorization": f"Bearer {API_KEY}"}, timeout=60)
    res.raise_for_status()
    return res.json()


@sgl.function
def qa(s, question):
    s += "Question: " + question + "\nAnswer:" + sgl.gen("answer", max_tokens=10)
    s += "\nSure?" + sgl.select("sure", ["True", "False", "Unknown"])


def test_programs_over_http_equal_the_servers_direct_output(runtime):
    state = qa.run("What is the capital of Peru?", backend=runtime, temperature=0)
    prompt = "Question: What is the capital of Peru?\nAnswer:"
    direct = _post(runtime, {"text": prompt, "sampling_params": {"temperature": 0,
                                                                 "max_new_tokens": 10}})
    assert state["answer"] == direct["text"]
    assert state["sure"] in ("True", "False", "Unknown")
    assert state.get_meta_info("sure")["cached_tokens"] > 0


class _NoTokenizerEndpoint(RuntimeEndpoint):
    """As seen from a machine without the model folder: select by server-side ids only."""

    def select_tokenizer(self):
        return None


@pytest.mark.parametrize("first_window", [select_scoring.FIRST_WINDOW, 1])
def test_select_without_a_local_tokenizer_matches_the_exact_path(runtime, monkeypatch,
                                                                 first_window):
    monkeypatch.setattr(select_scoring, "FIRST_WINDOW", first_window)  # 1: window must widen

    @sgl.function
    def pick(s):
        s += "The capital of France is " + sgl.select("x", ["Paris", "London", "Rome"])

    exact = pick.run(backend=runtime.endpoint).get_meta_info("x")
    remote = pick.run(backend=_NoTokenizerEndpoint(runtime.url, api_key=API_KEY))
    meta = remote.get_meta_info("x")
    assert remote["x"] == pick.run(backend=runtime).get_var("x")
    assert meta["choice_token_spans"] == exact["choice_token_spans"]
    assert meta["normalized_prompt_logprobs"] == pytest.approx(
        exact["normalized_prompt_logprobs"], abs=1e-4)


@sgl.function
def long_answer(s, question):
    # ignore_eos: the answer is exactly STREAM_STEPS tokens long, whatever the model says
    s += "Question: " + question + "\nAnswer:" + sgl.gen(
        "answer", max_tokens=STREAM_STEPS, ignore_eos=True)


# The tokenizer manager hands the SSE handler whatever piled up since it last woke (as
# SGLang's does), so a short answer can arrive in one event when the handler is slow to be
# scheduled (CI once got a 10-token answer in 1). A step budget instead of a timing hope:
# for fewer than three events, the handler would have to sleep through all of these decode
# steps but two.
STREAM_STEPS = 256


def test_streaming_over_sse_gives_the_same_text(runtime, monkeypatch):
    plain = long_answer.run("Is Oslo in Norway?", backend=runtime, temperature=0)["answer"]
    events = []
    send_stream = runtime.endpoint.send_stream

    def counted(body):
        for event in send_stream(body):
            events.append(event)
            yield event

    monkeypatch.setattr(runtime.endpoint, "send_stream", counted)
    state = long_answer.run("Is Oslo in Norway?", backend=runtime, temperature=0, stream=True)
    chunks = list(state.text_iter("answer"))
    assert "".join(chunks) == plain
    assert events[-1]["meta_info"]["completion_tokens"] == STREAM_STEPS
    # text_iter reads the state each time it is woken, so how many pieces it yields depends
    # on thread timing; the SSE events the frontend received carry the gen across several
    assert len(events) > 2
    assert all(e["meta_info"]["finish_reason"] is None for e in events[:-1])


def test_fork_over_http_hits_the_cache(runtime):
    @sgl.function
    def branches(s):
        s += "Document: " + " ".join(f"item{i}" for i in range(30)) + "\n"
        forks = s.fork(2)
        forks += ["Alpha:", "Budget:"]
        forks += sgl.gen("out", max_tokens=3)
        forks.join()
        return [f.get_meta_info("out")["cached_tokens"] for f in forks]

    state = branches.run(backend=runtime, temperature=0)
    prefill = state.stream_executor.usage[0]
    assert prefill.kind == "prefill"
    assert state.ret_value == [prefill.prompt_tokens] * 2


def test_helpers_work_with_a_runtime_as_default_backend(runtime):
    sgl.set_default_backend(runtime)
    try:
        # The Runtime itself is kept (SGLang's test_gen_min_new_tokens reads .endpoint).
        assert sgl.global_config.default_backend is runtime
        assert sgl.global_config.default_backend.endpoint.get_model_name() == str(
            runtime.model_path)
        qa.run("What is 2 plus 2?", temperature=0).sync()
        assert sgl.get_server_info()["cache_hit_rate"] > 0
        assert sgl.flush_cache() is True
        info = sgl.get_server_info()
        assert info["free_pages"] == info["total_pages"], "flush_cache must empty the cache"
    finally:
        sgl.global_config.default_backend = None


def test_server_errors_surface_with_the_field_name(runtime):
    @sgl.function
    def bad(s):
        s += "hi" + sgl.gen("x", top_p=5.0)

    with pytest.raises(ProgramError, match="HTTP 400.*top_p"):
        bad.run(backend=runtime)["x"]


def test_a_wrong_api_key_is_reported(runtime):
    with pytest.raises(RuntimeEndpointError, match="HTTP 401"):
        RuntimeEndpoint(runtime.url, api_key="wrong")


def test_an_unreachable_server_gives_a_clear_connection_error():
    url = f"http://127.0.0.1:{free_tcp_port()}"
    with pytest.raises(ConnectionError, match=f"cannot reach the server at {url}.*running"):
        RuntimeEndpoint(url)
    with pytest.raises(ValueError, match="base_url must be an http"):
        RuntimeEndpoint("localhost:30000")


def test_a_runtime_that_cannot_start_reports_its_log(tmp_path):
    with pytest.raises(RuntimeError, match="exited with code"):
        sgl.Runtime(model_path=tmp_path / "no-model-here", launch_timeout=60)


class _NewRoutesOnly(BaseHTTPRequestHandler):
    """A server that only knows /model_info and /server_info (upstream's new names)."""

    def _json(self, code: int, body: object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:  # noqa: N802 - http.server's API
        routes = {"/model_info": {"model_path": "remote/model-7b", "is_generation": True},
                  "/server_info": {"version": "x"}}
        self._json(200, routes[self.path]) if self.path in routes else \
            self._json(404, {"detail": "Not Found"})

    def log_message(self, *args: object) -> None:
        pass


def test_the_client_falls_back_to_the_new_route_names():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NewRoutesOnly)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        ep = RuntimeEndpoint(f"http://127.0.0.1:{server.server_address[1]}")
        assert ep.get_model_name() == "remote/model-7b"
        assert ep.get_server_info() == {"version": "x"}
        assert ep.select_tokenizer() is None  # not a folder here: no download is attempted
        assert ep.get_chat_template().name == "default"
    finally:
        server.shutdown()
