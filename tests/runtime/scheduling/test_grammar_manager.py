"""GrammarManager on its own: it changes grammar state and returns data, never the scheduler.

A fake matcher stands in for the fsm: its "grammar" is one literal string over a char-level
vocabulary (token id = the character's code point), so every outcome is known in advance.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from radixlm.fsm import GrammarError, JumpForwardPlan
from radixlm.fsm.compiled_grammar import MaskWaits
from radixlm.runtime.scheduling.grammar_manager import GrammarManager
from radixlm.runtime.scheduling.request import Req, RequestError
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.wire.messages import FinishAbort, FinishStop, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams

VOCAB = 128
EOS = 0


class CharTokenizer:
    """One token per ASCII character; id 0 is EOS."""

    eos_token_id = EOS

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [ord(c) for c in text]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        return "".join(chr(t) for t in ids if t != EOS)


class LiteralMatcher:
    """Accepts exactly ``target`` (then EOS); ``fail_at``: raise GrammarError (a budget hit)
    when asked to accept the character at that index."""

    def __init__(self, target: str, fail_at: int | None = None, pos: int = 0) -> None:
        self.target, self.fail_at, self.pos = target, fail_at, pos
        self.grammar = SimpleNamespace(waits=MaskWaits())  # the compiled grammar's counters

    @property
    def num_tokens(self) -> int:
        return self.pos

    def accept_token(self, token: int) -> bool:
        if self.pos == self.fail_at:
            raise GrammarError("states budget of 10 exceeded")
        if self.pos < len(self.target) and chr(token) == self.target[self.pos]:
            self.pos += 1
            return True
        return False

    def advance_ready(self, token: int, jump: bool) -> bool:
        return True  # a literal has no automaton rows to build: never deferred

    def accept_tokens(self, tokens: list[int]) -> bool:
        start = self.pos
        if all(self.accept_token(t) for t in tokens):
            return True
        self.pos = start
        return False

    def rollback(self, n: int) -> None:
        self.pos -= n

    def copy(self) -> LiteralMatcher:
        return LiteralMatcher(self.target, self.fail_at, self.pos)

    def must_end(self) -> bool:
        return self.pos == len(self.target)

    def jump_forward_string(self) -> str:
        return self.target[self.pos:]

    def fill_bitmask(self, row: np.ndarray) -> None:
        if self.fail_at == self.pos:
            raise GrammarError("states budget of 10 exceeded")
        row[:] = 0
        allowed = [EOS] if self.must_end() else [ord(self.target[self.pos])]
        for t in allowed:
            row[t // 32] |= np.int32(1 << (t % 32)) if t % 32 < 31 else np.int32(-(1 << 31))


@dataclass
class FakeGrammar:
    target: str
    fail_at: int | None = None

    def new_matcher(self) -> LiteralMatcher:
        return LiteralMatcher(self.target, self.fail_at)


@dataclass
class FakeVocab:
    extendable: np.ndarray = field(default_factory=lambda: np.zeros(VOCAB, dtype=bool))

    def decode_bytes(self, ids) -> bytes:
        return CharTokenizer().decode(ids).encode()


class FakeCompiler:
    """Futures keyed by the regex; a pattern named in ``bad`` is refused at once."""

    def __init__(self) -> None:
        self.vocab = FakeVocab()
        self.futures: dict[str, Future] = {}
        self.bad: set[str] = set()
        self.prefetched: list[int] = []  # matcher positions asked for, in order

    def prefetch(self, matcher: LiteralMatcher) -> bool:
        self.prefetched.append(matcher.pos)
        return False

    def compile_async(self, spec) -> Future:
        if spec.value in self.bad:
            raise GrammarError(f"cannot parse {spec.value!r}")
        return self.futures.setdefault(spec.value, Future())


class RecordingOps:
    """Stands in for the kernels: records what apply_token_bitmask was given."""

    def __init__(self) -> None:
        self.calls: list[tuple[torch.Tensor, torch.Tensor]] = []

    def apply_token_bitmask(self, logits, masks, index) -> None:
        self.calls.append((masks.clone(), index.clone()))


def make_manager(**args) -> tuple[GrammarManager, FakeCompiler, RecordingOps]:
    ops = RecordingOps()
    gm = GrammarManager(ServerArgs(model_path="unused", **args), CharTokenizer(), VOCAB, [EOS],
                        ops)
    compiler = FakeCompiler()
    gm._compiler = compiler  # the real one walks a tokenizer's vocabulary
    return gm, compiler, ops


def make_req(rid: str = "r", prompt: str = "p", **kw) -> Req:
    ids = CharTokenizer().encode(prompt)
    return Req(rid=rid, token_ids=list(ids), prompt_len=len(ids),
               sampling=SamplingParams(max_new_tokens=64), **kw)


def constrained(gm: GrammarManager, compiler: FakeCompiler, target: str, fail_at=None,
                **kw) -> Req:
    """A request admitted with a literal constraint whose compile has finished."""
    req = make_req(**kw)
    compiler.futures.setdefault(target, Future()).set_result(FakeGrammar(target, fail_at))
    gm.admit(req, GrammarReq(regex=target))
    return req


def sample(gm: GrammarManager, req: Req, text: str):
    """Append ``text`` token by token as the sampler would; the last step's outcome."""
    outcome = None
    for c in text:
        req.append_output(ord(c))
        outcome = gm.after_token(req, ord(c))
    return outcome


# -- compiles -------------------------------------------------------------------------------


def test_poll_reports_ready_and_failed_compiles_and_leaves_the_queue_alone():
    gm, compiler, _ = make_manager()
    reqs = [make_req(rid) for rid in ("ok", "bad", "slow")]
    for req, pattern in zip(reqs, ("ok", "bad", "slow")):
        gm.admit(req, GrammarReq(regex=pattern))
    waiting = list(reqs)
    compiler.futures["ok"].set_result(FakeGrammar("ok"))
    compiler.futures["bad"].set_exception(GrammarError("nested quantifier"))

    poll = gm.poll_compiles(waiting)

    assert poll.ready == [reqs[0]] and reqs[0].grammar is not None
    assert [(r.rid, msg) for r, msg in poll.failed] == [
        ("bad", "invalid constraint: nested quantifier")]
    assert reqs[2].grammar_future is not None, "a compile still running keeps its future"
    assert waiting == reqs, "the owner, not the manager, removes failed requests"
    assert gm.poll_compiles(waiting).ready == [], "each compile is reported once"


def test_a_malformed_constraint_is_refused_at_admission():
    gm, compiler, _ = make_manager()
    compiler.bad.add("(")
    with pytest.raises(RequestError, match="invalid constraint: cannot parse"):
        gm.admit(make_req(), GrammarReq(regex="("))


def test_an_unconstrained_request_has_no_grammar_step():
    gm, _, _ = make_manager()
    req = make_req()
    gm.admit(req, None)
    assert req.grammar is None and sample(gm, req, "x") is None


# -- after a token --------------------------------------------------------------------------


def test_the_grammar_ending_the_output_is_a_stop_on_the_token_that_completed_it():
    gm, compiler, _ = make_manager(disable_jump_forward=True)
    req = constrained(gm, compiler, "yes")
    assert sample(gm, req, "ye") is None
    outcome = sample(gm, req, "s")
    assert outcome == FinishStop(matched=ord("s"))
    assert outcome.matched == req.output_ids[-1], "an int matched is the last output token"


def test_a_token_outside_the_grammar_aborts_with_the_token_named():
    gm, compiler, _ = make_manager(disable_jump_forward=True)
    req = constrained(gm, compiler, "yes")
    outcome = sample(gm, req, "n")
    assert isinstance(outcome, FinishAbort)
    assert f"token {ord('n')} is not allowed" in outcome.message


def test_a_budget_hit_while_decoding_aborts_that_request_with_the_budget_named():
    gm, compiler, _ = make_manager(disable_jump_forward=True)
    req = constrained(gm, compiler, "yes", fail_at=1)
    outcome = sample(gm, req, "ye")
    assert outcome == FinishAbort(
        message="constraint failed while decoding: states budget of 10 exceeded")
    assert gm.error_reason(req) == outcome


def test_jump_forward_returns_a_plan_and_advances_the_matcher_over_it():
    gm, compiler, _ = make_manager()
    req = constrained(gm, compiler, "abcdefgh")
    plan = sample(gm, req, "a")
    assert isinstance(plan, JumpForwardPlan) and plan.tokens
    kept = req.output_ids[: req.num_output - plan.rollback]
    applied = CharTokenizer().decode(kept + list(plan.tokens))
    assert "abcdefgh".startswith(applied) and len(applied) > 1
    assert req.grammar.pos == len(applied), "the matcher stands where the plan ends"
    assert req.output_ids[:] == [ord("a")], "the manager leaves the output to its owner"


@pytest.mark.parametrize("args, req_kw", [({"disable_jump_forward": True}, {}),
                                          ({}, {"return_logprob": True})],
                         ids=["jump-forward disabled", "logprobs asked"])
def test_no_jump_without_jump_forward_or_with_logprobs(args, req_kw):
    gm, compiler, _ = make_manager(**args)
    req = constrained(gm, compiler, "abcdefgh", **req_kw)
    assert sample(gm, req, "a") is None and req.grammar.pos == 1


def test_the_constraint_starts_after_the_reasoning_end_marker():
    gm, compiler, _ = make_manager(reasoning_end_marker="</t>", disable_jump_forward=True)
    req = constrained(gm, compiler, "ok")
    assert not req.grammar_active
    assert sample(gm, req, "thinking...</t>") is None, "free text before the marker"
    assert req.grammar_active and req.grammar_start == req.num_output
    assert sample(gm, req, "o") is None
    assert sample(gm, req, "k") == FinishStop(matched=ord("k"))


# -- masks ----------------------------------------------------------------------------------


def test_masks_are_filled_for_active_constrained_rows_only_in_one_call():
    gm, compiler, ops = make_manager()
    free = make_req("free")
    yes = constrained(gm, compiler, "yes", rid="yes")
    broken = constrained(gm, compiler, "no", fail_at=0, rid="broken")
    gm.apply_masks([free, yes, broken], torch.zeros(3, VOCAB))

    (masks, index), = ops.calls
    assert index.tolist() == [1, 2]
    expected = np.zeros(masks.shape[1], dtype=np.int32)
    LiteralMatcher("yes").fill_bitmask(expected)
    assert masks[0].tolist() == expected.tolist()
    assert masks[1].tolist() == [-1] * masks.shape[1], "a failed row is left unmasked"
    assert broken.grammar_error == "states budget of 10 exceeded"
    assert yes.grammar_error is None and free.grammar_error is None


def test_the_next_mask_is_prefetched_after_each_token_but_not_after_the_end():
    gm, compiler, _ = make_manager(disable_jump_forward=True)
    req = constrained(gm, compiler, "yes")
    assert compiler.prefetched == [0], "the first mask is asked for when the compile lands"
    sample(gm, req, "ye")
    assert compiler.prefetched == [0, 1, 2]
    sample(gm, req, "s")  # the grammar ends here: no next mask to prefetch
    assert compiler.prefetched == [0, 1, 2]


def test_mask_waits_count_steps_and_fills_that_found_no_mask_ready():
    gm, compiler, _ = make_manager()
    yes = constrained(gm, compiler, "yes", rid="yes")
    gm.apply_masks([yes], torch.zeros(1, VOCAB))
    yes.grammar.grammar.waits.count += 1  # as a matcher does when it computes a cold mask

    def cold_fill(row: np.ndarray, fill=yes.grammar.fill_bitmask) -> None:
        yes.grammar.grammar.waits.count += 1
        fill(row)

    yes.grammar.fill_bitmask = cold_fill
    gm.apply_masks([yes, make_req("free")], torch.zeros(2, VOCAB))
    summary = gm.mask_waits.summary()
    assert summary["mask_wait_steps"] == 2 and summary["mask_wait_cold_fills"] == 1
    gm.apply_masks([make_req("free")], torch.zeros(1, VOCAB))
    assert gm.mask_waits.summary()["mask_wait_steps"] == 2, "no constrained row: no step"


def test_no_constrained_row_means_no_mask_call():
    gm, _, ops = make_manager()
    gm.apply_masks([make_req()], torch.zeros(1, VOCAB))
    assert ops.calls == []


def test_release_drops_the_grammar_state():
    gm, compiler, _ = make_manager()
    req = constrained(gm, compiler, "yes")
    gm.release(req)
    assert req.grammar is None and req.grammar_future is None
