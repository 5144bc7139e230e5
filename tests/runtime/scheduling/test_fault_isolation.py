"""One request's fault fails that request alone: a fault injected at each stage of handling
one request (admission, prompt scoring, mask, sampling, grammar step, finish check) gives it an
internal ``ErrorOut`` naming the stage, while its batch-mates finish exactly as without it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from radixlm.runtime.scheduling import output_processor
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import ErrorOut, FinishLength, GenerateReq, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams
from radixlm.runtime.wire.scheduler_process import _handle

BAD = "bad"
BAD_SEED = 1313  # marks the faulty request's sampling row


class InjectedFault(RuntimeError):
    pass


def _raise_for_bad(rid: str) -> None:
    if rid == BAD:
        raise InjectedFault("injected")


class FaultyMatcher:
    """A real matcher whose mask fill raises."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def fill_bitmask(self, out: Any) -> None:
        raise InjectedFault("injected")


def _in_mask(s: Scheduler, mp: pytest.MonkeyPatch) -> None:
    resolve = s.grammar._resolve

    def wrapped(req: Any) -> None:
        resolve(req)
        if req.rid == BAD:
            req.grammar = FaultyMatcher(req.grammar)

    mp.setattr(s.grammar, "_resolve", wrapped)


def _in_sampling(s: Scheduler, mp: pytest.MonkeyPatch) -> None:
    sample = output_processor.sample

    def wrapped(logits: Any, rows: Any, *a: Any) -> Any:
        if any(r.params.seed == BAD_SEED for r in rows):
            raise InjectedFault("injected")
        return sample(logits, rows, *a)

    mp.setattr(output_processor, "sample", wrapped)


def _wrap_method(obj: Any, name: str, rid_of: Callable[..., str]) -> Callable[..., None]:
    def inject(s: Scheduler, mp: pytest.MonkeyPatch) -> None:
        target = obj(s)
        original = getattr(target, name)

        def wrapped(*a: Any, **kw: Any) -> Any:
            _raise_for_bad(rid_of(*a))
            return original(*a, **kw)

        mp.setattr(target, name, wrapped)
    return inject


INJECT = {
    "admitting the request": _wrap_method(lambda s: s.grammar, "admit", lambda r, g: r.rid),
    "scoring the prompt": _wrap_method(lambda s: s.output, "_collect_input_logprobs",
                                       lambda c, rows: c.req.rid),
    "filling the constraint's token mask": _in_mask,
    "sampling": _in_sampling,
    "advancing the output": _wrap_method(lambda s: s.grammar, "after_token",
                                         lambda r, t: r.rid),
    "advancing the output (finish check)": _wrap_method(
        lambda s: s.output.finish, "check", lambda r, **kw: r.rid),
}


def _requests() -> list[GenerateReq]:
    """The faulty one and three mates: plain, constrained, with logprobs (all greedy)."""
    def make(rid: str, grammar: GrammarReq | None = None, seed: int | None = None,
             logprobs: bool = False) -> GenerateReq:
        return GenerateReq(rid=rid, input_ids=[5, 6, 7, 8 + len(rid)], grammar=grammar,
                           return_logprob=logprobs, top_logprobs_num=2 if logprobs else 0,
                           logprob_start_len=0 if logprobs else -1,
                           sampling=SamplingParams(temperature=0.0, max_new_tokens=4,
                                                   ignore_eos=True, seed=seed))
    return [make("plain"), make("regex", GrammarReq(regex="[a-z ]{4,8}")),
            make("lp", logprobs=True),
            make(BAD, GrammarReq(regex="[a-z ]{4,8}"), seed=BAD_SEED, logprobs=True)]


def _drive(s: Scheduler, msgs: list[GenerateReq], max_steps: int = 200
           ) -> tuple[dict[str, list[int]], dict[str, Any]]:
    """Submit through the scheduler process's handler and step until idle: each request's
    output ids and its final finish reason or ErrorOut."""
    ids: dict[str, list[int]] = {}
    ends: dict[str, Any] = {}
    for m in msgs:
        reply = _handle(s, m)
        if isinstance(reply, ErrorOut):
            ends[reply.rid] = reply
    for _ in range(max_steps):
        if not s.has_work():
            return ids, ends
        for r in s.waiting:  # wait for compiles by their futures, not by stepping
            if r.grammar_future is not None:
                r.grammar_future.exception(timeout=120)
        for out in s.step():
            ids.setdefault(out.rid, []).extend(out.new_ids)
            if out.finish_reason is not None:
                ends[out.rid] = out.finish_reason
        for err in s.errors:
            ends[err.rid] = err
        s.errors.clear()
    raise AssertionError(f"not idle after {max_steps} steps")


@pytest.mark.parametrize("stage", list(INJECT))
def test_a_fault_in_one_request_fails_it_alone(make_scheduler, monkeypatch, stage):
    reference, reference_ends = _drive(make_scheduler(), _requests())
    s = make_scheduler()
    INJECT[stage](s, monkeypatch)
    ids, ends = _drive(s, _requests())
    err = ends[BAD]
    assert isinstance(err, ErrorOut) and err.code == "internal", err
    assert err.message.startswith(f"internal error while {stage.split(' (')[0]}")
    assert "InjectedFault: injected" in err.message
    for rid in ("plain", "regex", "lp"):
        assert ends[rid] == reference_ends[rid], (rid, ends[rid])
        assert ids[rid] == reference[rid]
    assert reference_ends["plain"] == FinishLength(length=4)
    assert not s.reqs and not s.running and not s.waiting
    assert s.kv.audit() == []
    # and the scheduler serves the next batch as before
    ids2, ends2 = _drive(s, _requests()[:3])
    assert ids2 == {rid: reference[rid] for rid in ("plain", "regex", "lp")}
