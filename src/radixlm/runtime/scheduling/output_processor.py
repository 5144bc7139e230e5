"""After the forward: prompt logprobs, sampling, grammar steps, jump-forward, finish checks and
the ``ReqOut`` of every request that progressed.

The processor changes requests (their output, logprobs and finish reason) and the KV length of
a request whose output a jump-forward retokenized; it never releases memory or touches the
queues. It returns what happened (:class:`StepOutput`) and the scheduler acts on it: the
requests that finished are released by the scheduler.

Fault isolation: an exception while handling one request (its prompt logprobs, its mask, its
sample, its grammar step, its finish check, its output) fails that request alone: it is
reported in ``StepOutput.faulted`` with a message naming the stage and the error, and the rest
of the batch carries on. The batched sampler is retried row by row when it fails, so one bad
row cannot fail its batch-mates.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import torch

from ...fsm import JumpForwardPlan
from ..memory.kv_manager import KVManager
from ..model.forward_batch import ForwardBatch
from ..model.sampler import SampleResult, SampleRow, finite_logprobs, sample, top_logprobs
from ..server_args import ServerArgs
from ..wire.messages import FinishLength, FinishReason, ReqOut
from .budget_closing import budget_finish
from .finish_check import FinishCheck
from .grammar_manager import GrammarManager
from .request import PrefillChunk, Req
from .token_advance import AdvanceDeferred, GrammarStep

if TYPE_CHECKING:
    from ..speculative.draft_chain import DraftChain
    from .speculative_verify import DraftVerifier

logger = logging.getLogger(__name__)
# One drawn token: (id, its logprob or None, its top alternatives or None).
Draw = tuple[int, float | None, list[tuple[float, int]] | None]


@dataclass
class StepOutput:
    """What one step produced: the outputs to send, in batch order; the requests that
    finished in it (their ``finish_reason`` set, their last output among ``outs``); and the
    requests that failed on an internal error, with the message to report (no output of
    theirs is among ``outs``; the owner fails them without caching their KV)."""

    outs: list[ReqOut] = field(default_factory=list)
    finished: list[Req] = field(default_factory=list)
    faulted: list[tuple[Req, str]] = field(default_factory=list)

    def is_faulted(self, req: Req) -> bool:
        return any(r is req for r, _ in self.faulted)

    def fault(self, req: Req, stage: str, exc: BaseException) -> None:
        """Record that handling ``req`` raised ``exc`` during ``stage`` (logged with the
        traceback: an internal error is a bug to fix, not the client's fault)."""
        message = f"internal error while {stage}: {type(exc).__name__}: {exc}"
        logger.error("request %s failed: %s", req.rid, message, exc_info=exc)
        self.outs = [o for o in self.outs if o.rid != req.rid]
        self.finished = [r for r in self.finished if r is not req]
        if not self.is_faulted(req):
            self.faulted.append((req, message))

    @contextmanager
    def isolate(self, req: Req, stage: str) -> Iterator[None]:
        """Run a block for ``req`` alone: an exception in it faults ``req`` and is swallowed."""
        try:
            yield
        except Exception as exc:
            self.fault(req, stage, exc)


class OutputProcessor:
    """Turns a forward's logits into tokens, finish reasons and outputs."""

    def __init__(self, args: ServerArgs, kv: KVManager, grammar: GrammarManager,
                 finish: FinishCheck) -> None:
        self.args = args
        self.kv = kv
        self.grammar = grammar
        self.finish = finish
        self.generator = torch.Generator().manual_seed(args.random_seed)
        self.counters = {"generated_tokens": 0, "forced_tokens": 0}
        self.verifier: DraftVerifier | None = None  # set when speculative decoding is on

    def process(self, batch: ForwardBatch, decodes: list[Req], chunks: list[PrefillChunk],
                logits: torch.Tensor, drafts: Mapping[str, DraftChain] | None = None
                ) -> StepOutput:
        """Everything after the forward of ``decodes`` + ``chunks`` (in that batch order);
        ``logits`` holds the rows ``batch.logits_indptr`` delimits per request. A decoding
        request with a draft chain in ``drafts`` (by request id) is verified (:attr:`verifier`)."""
        step = StepOutput()
        to_sample: list[tuple[Req, int]] = []  # (request, logits row)
        ptr = batch.logits_indptr
        reqs = decodes + [c.req for c in chunks]
        for i, req in enumerate(reqs):
            assert req.kv is not None
            self.kv.mark_computed(req.kv)
            if i < len(decodes):
                chain = drafts.get(req.rid) if drafts else None
                if chain and self.verifier is not None:
                    self.verifier.verify(step, req, chain, logits[ptr[i] : ptr[i + 1]])
                else:
                    to_sample.append((req, ptr[i + 1] - 1))
                continue
            with step.isolate(req, "scoring the prompt"):
                if self._after_prefill(step, chunks[i - len(decodes)],
                                       logits[ptr[i] : ptr[i + 1]]):
                    to_sample.append((req, ptr[i + 1] - 1))
        if to_sample:
            self._sample(step, to_sample, logits)
        return step

    def _after_prefill(self, step: StepOutput, chunk: PrefillChunk, rows: torch.Tensor) -> bool:
        """Prompt logprobs and caching for a prefilled chunk; True if a token is due now."""
        req = chunk.req
        self._collect_input_logprobs(chunk, rows)
        # Only the prompt is cached while running: output tokens may still be retokenized by
        # jump-forward; all of it is cached when the request ends.
        self.kv.commit_prefix(req.kv, req.input_ids[:])
        if req.pending:  # a chunk of a longer prefill: nothing to sample yet
            return False
        if req.sampling.max_new_tokens == 0:
            req.in_logprobs_done = True
            self._end(step, req, FinishLength(length=0))
            return False
        return True

    # -- prompt logprobs ------------------------------------------------------------------

    def _collect_input_logprobs(self, c: PrefillChunk, rows: torch.Tensor) -> None:
        """Score the prompt tokens this chunk's logits ``rows`` [c.n or fewer, V] predict."""
        req = c.req
        pos0 = req.scored_from(c.start, c.n)
        if pos0 is None:
            return
        if req.logprob_start_len == 0 and c.start == 0:
            req.in_logprobs.append((None, req.token_ids[0]))
            req.in_top_logprobs.append(None)
        # row k holds the logits at position pos0 + k, which score prompt token pos0 + k + 1
        k_max = min(rows.shape[0], req.prompt_len - 1 - pos0)
        if k_max > 0:
            lp = finite_logprobs(rows[:k_max])
            targets = torch.tensor(req.token_ids[pos0 + 1 : pos0 + 1 + k_max])
            chosen = lp.gather(1, targets[:, None]).squeeze(1).tolist()
            req.in_logprobs.extend(zip(chosen, targets.tolist()))
            if req.top_logprobs_num:
                req.in_top_logprobs.extend(top_logprobs(lp, req.top_logprobs_num))
            else:
                req.in_top_logprobs.extend([None] * k_max)
        if c.start + c.n >= req.prompt_len:
            req.in_logprobs_done = True

    # -- sampling -------------------------------------------------------------------------

    def _sample(self, step: StepOutput, items: list[tuple[Req, int]],
                logits: torch.Tensor) -> None:
        """Mask, draw and advance every request due a token (``items``: its logits row)."""
        index = torch.tensor([row for _, row in items])
        reqs = [r for r, _ in items]
        draws = self._draw(step, reqs, logits, index)
        with self.grammar.advancing():  # the compiler's worker held off the GIL meanwhile
            for req, draw in zip(reqs, draws):
                if draw is None:  # faulted while masking or sampling
                    continue
                with step.isolate(req, "advancing the output"):
                    self._advance(step, req, draw)

    def _draw(self, step: StepOutput, reqs: list[Req], logits: torch.Tensor,
              index: torch.Tensor) -> list[Draw | None]:
        """One token per request, sampled in one batch; if the batch raises, row by row, so
        only the rows that fail alone are faulted (None)."""
        rows = logits.index_select(0, index)  # a copy (the sampler changes it in place)
        try:
            return self._draw_batch(step, reqs, rows)
        except Exception:
            logger.warning("batched sampling failed; sampling %d rows one by one", len(reqs),
                           exc_info=True)
        draws: list[Draw | None] = []
        for i, req in enumerate(reqs):
            draw = None
            if not step.is_faulted(req):
                with step.isolate(req, "sampling"):
                    draw = self._draw_batch(step, [req], logits[index[i : i + 1]])[0]
            draws.append(draw)
        return draws

    def _draw_batch(self, step: StepOutput, reqs: list[Req], rows: torch.Tensor
                    ) -> list[Draw | None]:
        for req, exc in self.grammar.apply_masks(reqs, rows):
            step.fault(req, "filling the constraint's token mask", exc)
        sample_rows = [
            SampleRow(params=r.sampling, output_ids=r.output_ids, prompt_ids=r.input_ids,
                      banned_ids=self.banned_ids(r), step=r.num_output)
            for r in reqs
        ]
        want_lp = any(r.return_logprob for r in reqs)
        top_n = max((r.top_logprobs_num for r in reqs if r.return_logprob), default=0)
        result = sample(rows, sample_rows, self.generator, want_lp, top_n)
        return [None if step.is_faulted(r) else draw_of(result, i, r)
                for i, r in enumerate(reqs)]

    def _advance(self, step: StepOutput, req: Req, draw: Draw) -> None:
        """Append the drawn token with its logprobs, then check finish and the grammar."""
        if self.take_token(step, req, draw) and (out := self.maybe_output(req)) is not None:
            step.outs.append(out)

    def take_token(self, step: StepOutput, req: Req, draw: Draw) -> bool:
        """Append the drawn token with its logprobs, then check finish and the grammar; False
        when the request ended (its last output is in ``step``)."""
        if req.grammar_error is not None:  # no mask: its sampled token is not kept
            self._end(step, req, self.grammar.error_reason(req))
            return False
        token, lp, top = draw
        if not req.num_output:
            req.first_token_time = time.time()
        req.append_output(token)
        self.counters["generated_tokens"] += 1
        if lp is not None:
            req.out_logprobs.append((lp, token))
            if top is not None:
                req.out_top_logprobs.append(top)
        reason = self.finish.check(req, sampled=token)
        if reason is None:
            reason = self._grammar_step(req, token)
        if reason is not None:
            self._end(step, req, reason)
            return False
        return True

    def banned_ids(self, req: Req, ahead: int = 0) -> list[int]:
        """EOS and stop ids are not allowed before min_new_tokens (for the token ``ahead``
        tokens after the next one: a draft position)."""
        p = req.sampling
        if req.num_output + ahead >= p.min_new_tokens:
            return []
        return sorted(self.finish.eos_ids | set(p.stop_token_ids or ()))

    def _grammar_step(self, req: Req, token: int) -> FinishReason | None:
        """Advance the constraint by ``token``; apply a jump-forward it plans (a deferred
        advance is made later: :meth:`resume_grammar`)."""
        return self._act_on(req, self.grammar.after_token(req, token))

    def resume_grammar(self, req: Req) -> ReqOut | None:
        """Make ``req``'s deferred grammar advance (the gate found it ready) and act on it as
        on any token's: a jump-forward applied, a finish reason set. Returns the output to
        send: the last one when it finished (the owner releases it), else what streaming
        owes now (a jump's forced tokens), or None."""
        reason = self._act_on(req, self.grammar.resume_advance(req))
        if reason is not None:
            return self.finish_output(req, reason)
        return self.maybe_output(req)

    def _act_on(self, req: Req, outcome: GrammarStep) -> FinishReason | None:
        if isinstance(outcome, JumpForwardPlan):
            return self.apply_jump(req, outcome.rollback, list(outcome.tokens))
        if isinstance(outcome, AdvanceDeferred):
            return None  # the token stays in the output; the request is held until resumed
        return outcome

    def apply_jump(self, req: Req, rollback: int, tokens: list[int]) -> FinishReason | None:
        """Replace the last ``rollback`` output tokens with ``tokens`` (jump-forward); their
        KV is computed by the next step's extend. Returns a finish reason if one applies.
        A request with no KV (retracted while its advance was deferred) has nothing to cut:
        its whole token list is prefilled again when it is readmitted."""
        n_out = req.num_output
        keep = n_out - rollback
        if req.kv is not None:
            # The newest output token has no KV yet; tokens before it do, and those replaced go.
            valid = req.prompt_len + min(keep, n_out - 1)
            self.kv.truncate(req.kv, valid)
        req.replace_output(keep, tokens)
        req.forced_tokens += max(len(tokens) - rollback, 0)
        self.counters["forced_tokens"] += max(len(tokens) - rollback, 0)
        if keep < req.sent_ids:
            req.pending_rollback += req.sent_ids - keep
            req.sent_ids = keep
        req.truncate_output(req.sampling.max_new_tokens)  # forced text never overshoots
        return self.finish.check(req, sampled=None, extra=len(tokens))

    # -- outputs --------------------------------------------------------------------------

    def _end(self, step: StepOutput, req: Req, reason: FinishReason) -> None:
        step.outs.append(self.finish_output(req, reason))
        step.finished.append(req)

    def finish_output(self, req: Req, reason: FinishReason) -> ReqOut:
        """Set ``req``'s finish reason and return its last output (the owner releases it);
        an output closed within its budget ends with ``length`` (:mod:`.budget_closing`)."""
        req.finish_reason = budget_finish(req, reason)
        return self.output(req)

    def maybe_output(self, req: Req) -> ReqOut | None:
        """What streaming owes ``req`` now (per ``stream_interval``), or None."""
        if not req.stream:
            return None
        pending = req.num_output - req.sent_ids
        if req.sent_first and pending < self.args.stream_interval:
            return None
        return self.output(req)

    def output(self, req: Req) -> ReqOut:
        """The ``ReqOut`` carrying what ``req`` has not sent yet (and marking it sent)."""
        send_input = (req.return_logprob and req.logprob_start_len >= 0
                      and req.in_logprobs_done and not req.in_logprobs_sent)
        out = ReqOut(
            rid=req.rid,
            new_ids=req.output_ids[req.sent_ids:],
            finish_reason=req.finish_reason,
            prompt_tokens=req.prompt_len,
            cached_tokens=max(req.cached_tokens, 0),
            completion_tokens=req.num_output,
            output_logprobs=req.out_logprobs,
            output_top_logprobs=req.out_top_logprobs,
            input_logprobs=req.in_logprobs if send_input else None,
            input_top_logprobs=req.in_top_logprobs if send_input else None,
            rollback=req.pending_rollback,
            detok=None if req.sent_first else req.detok_params(),
            forced_tokens=req.forced_tokens,
            first_token_time=req.first_token_time,
        )
        req.in_logprobs_sent = req.in_logprobs_sent or send_input
        req.sent_first = True
        req.sent_ids = req.num_output
        req.out_logprobs, req.out_top_logprobs = [], []
        req.pending_rollback = 0
        return out


def draw_of(result: SampleResult, i: int, req: Req) -> Draw:
    """Row ``i`` of a batch ``result``, with the logprobs ``req`` asked for."""
    lp = top = None
    if req.return_logprob and result.logprobs is not None:
        lp = result.logprobs[i]
        if req.top_logprobs_num and result.top_logprobs is not None:
            top = result.top_logprobs[i][: req.top_logprobs_num]
    return result.next_ids[i], lp, top
