"""The Engine end to end: exactness, concurrency, caching, abort, retraction, pool accounting."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from radixlm.runtime.api.tokenizer_manager import EngineDeadError, GenerateError
from radixlm.runtime.memory.pool_sizing import DEFAULT_CPU_SEQUENCES

PROMPTS = [
    "The capital of France is",
    '{"name": "Heidi", "age": 6, "city": "Paris"',
    "Question: What is 3 plus 4?\nAnswer:",
    "Document: Meet Carol, a teacher from Rome. Carol is 41.\nJSON:",
    "x",
]
GREEDY = {"temperature": 0.0}


@pytest.fixture(scope="module")
def engine(make_engine, tiny_llama_path):
    return make_engine(tiny_llama_path, page_size=1, chunked_prefill_size=64)


@pytest.fixture(scope="module")
def paged_engine(make_engine, tiny_llama_path):
    return make_engine(tiny_llama_path, page_size=16, chunked_prefill_size=32,
                       schedule_policy="fcfs")


def wait_idle_and_flush(engine) -> dict:
    assert engine.flush_cache()
    info = engine.get_server_info()
    assert info["free_pages"] == info["total_pages"], "KV pool not entirely free after flush"
    assert engine.audit() == []
    return info


@pytest.mark.parametrize("which", ["engine", "paged_engine"])
def test_greedy_equals_transformers_generate(request, tiny_llama_path, which):
    eng = request.getfixturevalue(which)
    hf = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    outs = eng.generate(PROMPTS, {**GREEDY, "max_new_tokens": 40})
    for prompt, out in zip(PROMPTS, outs):
        ids = tok(prompt).input_ids
        ref = hf.generate(torch.tensor([ids]), attention_mask=torch.ones(1, len(ids),
                          dtype=torch.long), max_new_tokens=40, do_sample=False)
        ref_ids = ref[0, len(ids):].tolist()
        assert out["output_ids"] == ref_ids
        assert out["text"] == tok.decode(ref_ids, skip_special_tokens=True)
        assert out["meta_info"]["completion_tokens"] == len(ref_ids)
        assert out["meta_info"]["prompt_tokens"] == len(ids)


def test_200_requests_from_32_threads_equal_each_alone(engine):
    prompts = [f"{PROMPTS[i % 4]} {i}" for i in range(20)]
    params = {**GREEDY, "max_new_tokens": 12}
    alone = {p: engine.generate(p, params)["output_ids"] for p in prompts}
    work = [prompts[i % len(prompts)] for i in range(200)]
    with ThreadPoolExecutor(32) as pool:
        results = list(pool.map(lambda p: engine.generate(p, params), work))
    assert len(results) == 200
    for p, r in zip(work, results):
        assert r["output_ids"] == alone[p]
        assert r["meta_info"]["finish_reason"] is not None
    wait_idle_and_flush(engine)


@pytest.mark.parametrize(("which", "page"), [("engine", 1), ("paged_engine", 16)])
def test_cached_tokens_equal_the_shared_prefix(request, tiny_llama_path, which, page):
    eng = request.getfixturevalue(which)
    assert eng.flush_cache()
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    doc = "Document: " + " ".join(f"word{i}" for i in range(60))
    first = eng.generate(doc, {**GREEDY, "max_new_tokens": 0})
    assert first["meta_info"]["cached_tokens"] == 0
    second = eng.generate(doc + " Question: who?", {**GREEDY, "max_new_tokens": 4})
    # the shared prefix is the first prompt's tokens, minus a token merged at the boundary
    a, b = tok(doc).input_ids, tok(doc + " Question: who?").input_ids
    shared = next(i for i, (x, y) in enumerate(zip(a + [-1], b)) if x != y)
    assert second["meta_info"]["cached_tokens"] == shared - shared % page
    # a finished request's prompt and output stay cached for the next turn
    turn2 = doc + " Question: who?" + second["text"] + " And then?"
    third = eng.generate(turn2, {**GREEDY, "max_new_tokens": 2})
    assert third["meta_info"]["cached_tokens"] >= len(b) - len(b) % page


def test_abort_mid_generation_frees_its_kv(engine):
    wait_idle_and_flush(engine)
    stream = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 400, "ignore_eos": True},
                             stream=True)
    chunks = [next(stream) for _ in range(3)]
    assert chunks[-1]["meta_info"]["finish_reason"] is None
    stream.close()  # the client goes away: its request is aborted
    info = engine.get_server_info()
    for _ in range(50):
        if info["running"] == 0:
            break
        info = engine.get_server_info()
    assert info["running"] == 0 and info["running_tokens"] == 0
    assert info["aborted"] >= 1
    wait_idle_and_flush(engine)


def test_default_cpu_pool_holds_the_default_sequences_of_full_context(engine):
    info = engine.get_server_info()  # page size 1: pages are tokens
    assert info["total_pages"] == info["max_context"] * DEFAULT_CPU_SEQUENCES
    assert engine.server_args.max_running_requests is None  # the default, not a given number


def test_kv_exhaustion_retracts_and_completes_every_request(make_engine, tiny_llama_path):
    small = make_engine(tiny_llama_path, page_size=4, max_total_tokens=160,
                        chunked_prefill_size=64)
    roomy = make_engine(tiny_llama_path, page_size=4)
    params = {**GREEDY, "max_new_tokens": 40, "ignore_eos": True}
    prompts = [f"{p} {i}" for i, p in enumerate(PROMPTS * 2)]
    expected = roomy.generate(prompts, params)
    got = small.generate(prompts, params)
    assert [g["output_ids"] for g in got] == [e["output_ids"] for e in expected]
    info = small.get_server_info()
    assert info["retracted"] > 0, "the pool was meant to run out"
    wait_idle_and_flush(small)


def test_bad_inputs_are_refused_and_the_engine_carries_on(engine):
    with pytest.raises(ValueError, match="temperature"):
        engine.generate("hi", {"temperature": -1})
    with pytest.raises(ValueError, match="unknown field.*max_tokenz"):
        engine.generate("hi", {"max_tokenz": 3})
    with pytest.raises(ValueError, match="max_new_tokens"):
        engine.generate("hi", {"max_new_tokens": "many"})
    with pytest.raises(GenerateError, match="prompt has 3000 tokens; the context length is"):
        engine.generate(input_ids=[5] * 3000)
    with pytest.raises(GenerateError, match="outside"):
        engine.generate(input_ids=[5, 10**6])
    engine.abort_request("no-such-request")
    out = engine.generate("still serving", {**GREEDY, "max_new_tokens": 3})
    assert out["meta_info"]["completion_tokens"] == 3


def test_prompt_logprobs_match_transformers(engine, tiny_llama_path):
    hf = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    prompt = PROMPTS[3]
    ids = tok(prompt).input_ids
    engine.generate(prompt, {**GREEDY, "max_new_tokens": 0})  # cached: must not skip scoring
    out = engine.generate(prompt, {**GREEDY, "max_new_tokens": 0}, return_logprob=True,
                          logprob_start_len=0, top_logprobs_num=3,
                          return_text_in_logprobs=True)
    meta = out["meta_info"]
    assert out["text"] == "" and meta["completion_tokens"] == 0
    assert meta["finish_reason"] == {"type": "length", "length": 0}
    entries = meta["input_token_logprobs"]
    assert [e[1] for e in entries] == ids
    assert entries[0][0] is None  # no context for the first token
    ref = torch.log_softmax(hf(torch.tensor([ids])).logits[0].float(), -1)
    for i, (lp, tid, text) in enumerate(entries[1:], start=1):
        assert abs(lp - ref[i - 1, tid].item()) < 1e-4
        assert text == tok.decode([tid])
    top = meta["input_top_logprobs"]
    assert top[0] is None and len(top[1]) == 3
    assert top[1][0][1] == int(ref[0].argmax())


def test_output_logprobs_and_start_offset(engine, tiny_llama_path):
    hf = AutoModelForCausalLM.from_pretrained(tiny_llama_path, dtype=torch.float32).eval()
    tok = AutoTokenizer.from_pretrained(tiny_llama_path)
    ids = tok(PROMPTS[0]).input_ids
    out = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 5}, return_logprob=True,
                          logprob_start_len=len(ids) - 2, top_logprobs_num=2)
    meta = out["meta_info"]
    assert [e[1] for e in meta["input_token_logprobs"]] == ids[-2:]
    assert len(meta["output_token_logprobs"]) == 5 and len(meta["output_top_logprobs"]) == 5
    full = torch.tensor([ids + out["output_ids"]])
    ref = torch.log_softmax(hf(full).logits[0].float(), -1)
    for k, (lp, tid, _) in enumerate(meta["output_token_logprobs"]):
        assert abs(lp - ref[len(ids) - 1 + k, tid].item()) < 1e-4
        assert meta["output_top_logprobs"][k][0][1] == tid  # greedy picks the top token


def test_streaming_gives_the_same_final_text(engine):
    params = {**GREEDY, "max_new_tokens": 30}
    whole = engine.generate(PROMPTS[1], params)
    chunks = list(engine.generate(PROMPTS[1], params, stream=True))
    texts = [c["text"] for c in chunks]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:])), "stream text must only grow"
    assert texts[-1] == whole["text"]
    assert chunks[-1]["output_ids"] == whole["output_ids"]
    assert chunks[-1]["meta_info"]["finish_reason"] == whole["meta_info"]["finish_reason"]


def test_a_slow_reader_still_gets_the_final_chunk(engine):
    """The request finishes while the reader holds its first chunk: the stream must still
    deliver the rest (CI once lost the last token's text of an SSE stream this way)."""
    params = {**GREEDY, "max_new_tokens": 12, "ignore_eos": True}
    whole = engine.generate(PROMPTS[0], params)
    done = threading.Event()
    hook = lambda summary: summary["rid"] == "slow-reader" and done.set()  # noqa: E731
    engine.tokenizer_manager.finish_hooks.append(hook)
    try:
        stream = engine.generate(PROMPTS[0], params, stream=True, rid="slow-reader")
        first = next(stream)
        assert first["meta_info"]["finish_reason"] is None
        assert done.wait(300), "the request never finished"
        chunks = [first, *stream]
    finally:
        engine.tokenizer_manager.finish_hooks.remove(hook)
    assert chunks[-1]["text"] == whole["text"]
    assert chunks[-1]["output_ids"] == whole["output_ids"]
    assert chunks[-1]["meta_info"]["finish_reason"] == whole["meta_info"]["finish_reason"]


@pytest.mark.parametrize("field", ["stop", "stop_regex"])
def test_stops_are_trimmed_and_never_streamed(engine, field):
    """A stop string, or a regex (two characters with any one between), ends the output:
    trimmed, reported as ``matched``, and held back while streaming until it can be ruled out."""
    params = {**GREEDY, "max_new_tokens": 40, "ignore_eos": True}
    free = engine.generate(PROMPTS[2], params)["text"]
    assert len(free) > 6
    stop = free[3:6] if field == "stop" else re.escape(free[3]) + "." + re.escape(free[5])
    found = re.search(stop if field == "stop_regex" else re.escape(stop), free)
    out = engine.generate(PROMPTS[2], {**params, field: [stop]})
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert out["text"] == free[: found.start()]
    chunks = [c["text"] for c in engine.generate(PROMPTS[2], {**params, field: stop},
                                                 stream=True)]
    pattern = stop if field == "stop_regex" else re.escape(stop)
    assert all(re.search(pattern, t) is None for t in chunks) and chunks[-1] == out["text"]
    assert all(b.startswith(a) for a, b in zip(chunks, chunks[1:]))
    kept = engine.generate(PROMPTS[2], {**params, field: stop, "no_stop_trim": True})
    assert kept["text"].startswith(free[: found.end()])  # untrimmed: through the stop


@pytest.mark.parametrize("patterns, problem", [
    (["("], "invalid pattern"), (["a*"], "empty string"), ([""], "empty patterns")])
def test_bad_stop_regex_is_refused_by_name(engine, patterns, problem):
    with pytest.raises(Exception, match=f"stop_regex.*{problem}"):
        engine.generate("x", {"stop_regex": patterns})


def test_stop_token_ids_min_and_max_new_tokens(engine):
    free = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 20, "ignore_eos": True})
    target = free["output_ids"][4]
    out = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 20,
                                       "stop_token_ids": [target]})
    first = free["output_ids"].index(target)
    assert out["output_ids"] == free["output_ids"][: first + 1]
    assert out["meta_info"]["finish_reason"] == {"type": "stop", "matched": target}
    longer = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 20, "min_new_tokens": 12,
                                          "stop_token_ids": [target]})
    assert longer["meta_info"]["completion_tokens"] >= 12


def test_seeded_sampling_is_reproducible_and_n_expands(engine):
    params = {"temperature": 1.0, "top_p": 0.9, "max_new_tokens": 12, "seed": 7}
    a = engine.generate(PROMPTS[0], params)
    batch = engine.generate([PROMPTS[1], PROMPTS[0], PROMPTS[2]], params)
    assert batch[1]["output_ids"] == a["output_ids"], "a seed must not depend on batching"
    many = engine.generate(PROMPTS[0], {"temperature": 1.0, "max_new_tokens": 8, "n": 3})
    assert isinstance(many, list) and len(many) == 3
    top1 = engine.generate(PROMPTS[0], {"temperature": 1.0, "top_k": 1, "max_new_tokens": 8})
    greedy = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 8})
    assert top1["output_ids"] == greedy["output_ids"]


def test_async_generate(engine):
    import asyncio

    async def run():
        one = await engine.async_generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 6})
        chunks = [c async for c in await engine.async_generate(
            PROMPTS[0], {**GREEDY, "max_new_tokens": 6}, stream=True)]
        return one, chunks

    one, chunks = asyncio.run(run())
    assert chunks[-1]["text"] == one["text"] and one["meta_info"]["completion_tokens"] == 6


def test_malformed_socket_message_is_dropped(engine):
    import zmq

    ctx = zmq.Context()
    sock = ctx.socket(zmq.PUSH)
    sock.connect(engine.tokenizer_manager.endpoints.scheduler)
    sock.send(b"\x00not msgpack at all")
    sock.send(b"\x81\xa4type\xa7Unknown")
    sock.close(linger=1000)
    ctx.term()
    out = engine.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 2})
    assert out["meta_info"]["completion_tokens"] == 2


def test_scheduler_crash_is_reported_not_hung(make_engine, tiny_llama_path):
    import os
    import signal
    import time

    eng = make_engine(tiny_llama_path)
    stream = eng.generate(PROMPTS[0], {**GREEDY, "max_new_tokens": 2000, "ignore_eos": True},
                          stream=True)
    next(stream)
    os.kill(eng._procs.procs["scheduler"].pid, signal.SIGKILL)
    start = time.monotonic()
    with pytest.raises(GenerateError, match="scheduler process exited"):
        for _ in stream:
            pass
    assert time.monotonic() - start < 10
    with pytest.raises(GenerateError, match="not running"):
        eng.generate("anything")
    with pytest.raises(EngineDeadError, match="not running: .*scheduler process exited: "
                       r"killed by SIGKILL \(exit code -9, pid \d+\)"):
        eng.generate("anything")
    eng.shutdown()
    with pytest.raises(EngineDeadError, match="shut down"):  # not a hang on a stopped loop
        eng.generate("after shutdown")


def test_child_processes_die_with_the_parent(tiny_llama_path, tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "parent.py"
    script.write_text(
        "import sys, time\n"
        "from radixlm.runtime.api.engine import Engine\n"
        "if __name__ == '__main__':\n"
        f"    e = Engine(model_path={str(tiny_llama_path)!r})\n"
        "    print(' '.join(str(p.pid) for p in e._procs.procs.values()), flush=True)\n"
        "    time.sleep(600)\n")
    parent = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    children = [int(p) for p in parent.stdout.readline().split()]
    assert len(children) == 2
    parent.send_signal(signal.SIGKILL)
    parent.wait()

    def alive(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    deadline = time.monotonic() + 10
    while any(alive(p) for p in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(alive(p) for p in children), "engine children outlived their parent"
