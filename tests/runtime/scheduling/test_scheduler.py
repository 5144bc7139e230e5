"""Scheduling decisions, driven step by step in-process (no child processes)."""

from __future__ import annotations

import json

import pytest

from radixlm.runtime.scheduling.schedule_policy import DEDUP_MIN_TOKENS
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import (
    FinishStop,
    GenerateReq,
    GrammarReq,
    finish_reason_json,
)
from radixlm.runtime.wire.sampling_params import SamplingParams


def req(rid: str, ids: list[int], new: int = 4) -> GenerateReq:
    return GenerateReq(rid=rid, input_ids=ids,
                       sampling=SamplingParams(temperature=0.0, max_new_tokens=new,
                                               ignore_eos=True))


def run_until_idle(s: Scheduler, limit: int = 500) -> dict[str, list]:
    finished: dict[str, list] = {}
    for _ in range(limit):
        if not s.has_work():
            return finished
        for out in s.step():
            finished.setdefault(out.rid, []).append(out)
    raise AssertionError("scheduler did not finish")


def test_lpm_serves_cached_prefixes_first_but_does_not_starve(make_scheduler):
    s = make_scheduler(schedule_policy="lpm", lpm_max_wait_steps=3, chunked_prefill_size=40)
    doc = list(range(10, 110))
    s.add_request(req("warm", doc, new=1))
    run_until_idle(s)
    s.add_request(req("cold", list(range(500, 540))))
    for i in range(6):
        s.add_request(req(f"hit{i}", doc + [200 + i] * 30))
    admitted = []
    for _ in range(200):
        if not s.has_work():
            break
        before = {r.rid for r in s.running}
        s.step()
        admitted += [r.rid for r in s.running if r.rid not in before]
    assert admitted[0].startswith("hit"), "the cached prefix goes first under lpm"
    assert "cold" in admitted[:5], "a request with no cache hit must not wait forever"


def test_in_batch_dedupe_lets_the_second_request_reuse_the_prefix(make_scheduler):
    s = make_scheduler(chunked_prefill_size=2048, schedule_policy="fcfs")
    shared = list(range(10, 210))
    s.add_request(req("a", shared + [1000, 1001]))
    s.add_request(req("b", shared + [2000, 2001]))
    outs = run_until_idle(s)
    cached = {rid: o[-1].cached_tokens for rid, o in outs.items()}
    assert cached["a"] == 0 and cached["b"] == len(shared)


def test_requests_sharing_an_unfinished_prefix_tail_duplicate_under_32_tokens_a_step(
        make_scheduler):
    # The first request's last chunk still computes the shared prefix's 6-token tail when the
    # others are admitted: at most DEDUP_MIN_TOKENS - 1 duplicated tokens in that step (the
    # rest wait one step and hit the cache), the same greedy tokens as without the cache.
    # (Counted per request, four would each recompute the tail: 40 tokens.)
    shared = list(range(10, 84))  # 74 tokens: chunks of 64 leave a 10-token tail
    prompts = {f"q{i}": shared + [300 + i] * 2 for i in range(8)}
    outs = {}
    for cache in (True, False):
        s = make_scheduler(chunked_prefill_size=64, schedule_policy="fcfs",
                           disable_radix_cache=not cache)
        for rid, ids in prompts.items():
            s.add_request(req(rid, ids))
        outs[cache] = run_until_idle(s)
    computed = sum(len(ids) - outs[True][rid][-1].cached_tokens for rid, ids in prompts.items())
    unique = len(shared) + 2 * len(prompts)
    assert unique <= computed < unique + DEDUP_MIN_TOKENS
    for rid in prompts:
        tokens = [[t for o in outs[c][rid] for t in o.new_ids] for c in (True, False)]
        assert tokens[0] == tokens[1] and len(tokens[0]) == 4


def test_chunked_prefill_interleaves_with_running_decodes(make_scheduler):
    s = make_scheduler(chunked_prefill_size=32, schedule_policy="fcfs")
    s.add_request(req("short", [5, 6, 7], new=30))
    s.step()  # short prefilled
    s.add_request(req("long", list(range(100, 300)), new=2))
    decoded_during_prefill = 0
    for _ in range(6):
        outs = s.step()
        long_req = next((r for r in s.running if r.rid == "long"), None)
        if long_req is not None and long_req.pending > 1:
            decoded_during_prefill += 1
        assert not any(o.rid == "long" and o.new_ids for o in outs)
    short = next(r for r in s.running if r.rid == "short")
    assert decoded_during_prefill >= 4 and len(short.output_ids) >= 6
    run_until_idle(s)
    assert s.kv.flush() and s.kv.allocator.num_free_pages == s.kv.allocator.num_pages


@pytest.mark.parametrize("page_size", [1, 4])
def test_pool_accounting_survives_a_mixed_workload(make_scheduler, page_size):
    s = make_scheduler(page_size=page_size, max_total_tokens=256, chunked_prefill_size=48)
    for i in range(12):
        s.add_request(req(f"r{i}", list(range(10 + i, 60 + 3 * i)), new=10 + i))
    for _ in range(3):
        s.step()
    aborted = s.abort("r3")
    assert s.abort("no-such-request") is None
    outs = run_until_idle(s)
    outs["r3"] = outs.get("r3", []) + [aborted]
    assert set(outs) == {f"r{i}" for i in range(12)}
    assert finish_reason_json(outs["r3"][-1].finish_reason)["type"] == "abort"
    assert s.kv.audit() == []
    assert s.kv.flush() and s.kv.allocator.num_free_pages == s.kv.allocator.num_pages


def test_a_request_larger_than_the_pool_is_refused_or_cut_not_looped(make_scheduler):
    from radixlm.runtime.scheduling.request import RequestError

    s = make_scheduler(page_size=4, max_total_tokens=64, chunked_prefill_size=64)
    with pytest.raises(RequestError, match="KV pool holds 64"):
        s.add_request(req("huge", list(range(10, 90))))
    s.add_request(req("grows", list(range(10, 50)), new=100))
    outs = run_until_idle(s)
    final = outs["grows"][-1]
    assert finish_reason_json(final.finish_reason)["type"] == "length"
    assert finish_reason_json(final.finish_reason).get("message") == "KV pool exhausted"
    assert final.completion_tokens < 100
    assert s.kv.flush() and s.kv.allocator.num_free_pages == s.kv.allocator.num_pages


@pytest.mark.parametrize("jump", [True, False], ids=["jump-forward", "no jump-forward"])
def test_a_constrained_stop_reports_the_token_that_ended_the_output(make_scheduler, jump):
    """When the grammar ends the output (only EOS could follow, so none is sampled),
    ``matched`` is the token that completed it: as for an EOS or stop token, an int
    ``matched`` is the last output id, with or without forced tokens before it."""
    key = "a_rather_long_key_name"
    schema = {"type": "object", "properties": {key: {"type": "boolean"}}, "required": [key],
              "additionalProperties": False}
    s = make_scheduler(disable_jump_forward=not jump)
    s.add_request(GenerateReq(rid="c", input_ids=[5, 6, 7],
                              grammar=GrammarReq(json_schema=json.dumps(schema)),
                              sampling=SamplingParams(temperature=0.0, max_new_tokens=64)))
    if s.reqs["c"].grammar_future is not None:
        s.reqs["c"].grammar_future.result()  # compiled off the loop thread
    (out,) = run_until_idle(s)["c"]
    assert isinstance(out.finish_reason, FinishStop), out.finish_reason
    assert out.finish_reason.matched == out.new_ids[-1]
    assert list(json.loads(s.tokenizer.decode(out.new_ids))) == [key]
    assert (out.forced_tokens > 0) == jump


def test_a_retracted_constrained_request_keeps_its_constraint(make_scheduler):
    """Retraction gives back KV, not the grammar state: the request resumes constrained."""
    schema = {"type": "array", "items": {"type": "boolean"}, "minItems": 8, "maxItems": 8}
    s = make_scheduler(page_size=4, max_total_tokens=80, chunked_prefill_size=64,
                       disable_jump_forward=True)
    for rid, first in (("a", 10), ("b", 40)):
        s.add_request(GenerateReq(rid=rid, input_ids=list(range(first, first + 12)),
                                  grammar=GrammarReq(json_schema=json.dumps(schema)),
                                  sampling=SamplingParams(temperature=0.0, max_new_tokens=200)))
        if s.reqs[rid].grammar_future is not None:
            s.reqs[rid].grammar_future.result()  # compiled off the loop thread
    outs = run_until_idle(s)
    assert s.counters["retracted"] > 0, "the pool is sized so that one request is retracted"
    for rid in ("a", "b"):
        ids = [t for out in outs[rid] for t in out.new_ids]
        text = s.tokenizer.decode(ids)
        assert isinstance(outs[rid][-1].finish_reason, FinishStop), (text, outs[rid][-1])
        assert len(json.loads(text)) == 8
