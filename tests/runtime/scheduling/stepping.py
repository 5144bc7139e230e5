"""Stepping a scheduler in-process until idle, with the constrained request the holding tests
share (a small object schema, greedy): its outputs, finish reasons and a reference run."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import jsonschema

from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import FinishStop, GenerateReq, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 8},
                   "age": {"type": "integer", "minimum": 0, "maximum": 99},
                   "city": {"enum": ["Paris", "Rome", "Oslo"]}},
    "required": ["name", "age", "city"], "additionalProperties": False,
}
PROMPT = list(range(5, 25))


def constrained(rid: str = "json") -> GenerateReq:
    return GenerateReq(rid=rid, input_ids=PROMPT,
                       grammar=GrammarReq(json_schema=json.dumps(SCHEMA)),
                       sampling=SamplingParams(temperature=0.0, max_new_tokens=80))


def free(rid: str = "free", new: int = 20) -> GenerateReq:
    return GenerateReq(rid=rid, input_ids=list(range(30, 42)),
                       sampling=SamplingParams(temperature=0.0, max_new_tokens=new,
                                               ignore_eos=True))


def run(s: Scheduler, limit: int = 2000,
        on_step: Callable[[int, dict[str, list[int]]], None] | None = None
        ) -> tuple[dict[str, list[int]], dict[str, object]]:
    """Step until idle: each request's output ids and its finish reason."""
    ids: dict[str, list[int]] = {}
    reasons: dict[str, object] = {}
    for n in range(1, limit + 1):
        if not s.has_work():
            return ids, reasons
        for req in s.waiting:
            if req.grammar_future is not None:
                req.grammar_future.result()  # compiled off the loop thread: not a step
        for out in s.step():
            ids.setdefault(out.rid, []).extend(out.new_ids)
            if out.finish_reason is not None:
                reasons[out.rid] = out.finish_reason
        if on_step is not None:
            on_step(n, ids)
    raise AssertionError("the scheduler did not finish (a held request was lost?)")


def reference(make_scheduler, **args) -> list[int]:  # noqa: ANN001
    """The constrained request's greedy output when steps may wait a long time for masks."""
    s = make_scheduler(grammar_mask_wait_ms=60_000, **args)
    s.add_request(constrained())
    ids, reasons = run(s)
    assert isinstance(reasons["json"], FinishStop)
    return ids["json"]


def not_ready_at_first(s: Scheduler, check: str, not_ready_checks: int) -> Counter:
    """Make the scheduler's grammar for SCHEMA (fetched from its compiler's cache by the same
    spec) answer False from its readiness check ``check`` (``"mask_ready"``, per state, or
    ``"advance_ready"``, per state and token) for the first ``not_ready_checks`` calls with
    the same state (and token); what is checked is unchanged. Returns the call counter."""
    spec = s.grammar.spec(GrammarReq(json_schema=json.dumps(SCHEMA)))
    grammar = s.grammar.compiler.compile(spec)  # the cached grammar the request uses
    checks: Counter = Counter()
    really_ready = getattr(grammar, check)

    def ready(*args: object) -> bool:
        key = args[:2]  # (state,) or (state, token): not advance_ready's jump flag
        checks[key] += 1
        return checks[key] > not_ready_checks and really_ready(*args)

    setattr(grammar, check, ready)
    return checks


def matches_reference(make_scheduler, s: Scheduler, **args) -> dict[str, object]:  # noqa: ANN001
    """Run the constrained request on ``s`` until idle: its tokens are exactly the reference
    run's (made with the same ``args``), it ends on the grammar's stop, and its text is valid.
    Returns ``s.info()``."""
    expected = reference(make_scheduler, **args)
    s.add_request(constrained())
    ids, reasons = run(s)
    assert ids["json"] == expected
    assert isinstance(reasons["json"], FinishStop), "a held request is not lost: it finishes"
    jsonschema.validate(json.loads(s.tokenizer.decode(ids["json"])), SCHEMA)
    return {**s.info(), "output_tokens": len(ids["json"])}
