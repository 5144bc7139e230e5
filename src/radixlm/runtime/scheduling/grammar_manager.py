"""Constrained decoding inside the scheduler: compiles, masks, grammar state, jump-forward.

A constrained request is admitted with a compile future (built off the scheduler thread by the
fsm package, within its time/state/memory budget); it waits until the grammar is ready, or is
failed with the compiler's message. Each step the allowed-token bitmasks of the constrained
rows are filled and applied to the logits in one call (unconstrained rows are untouched), and
each sampled token advances its matcher. A grammar that can only end finishes the request at
once; with jump-forward, a deterministic run of text is appended as forced tokens (see
:meth:`GrammarManager.jump`). With ``reasoning_end_marker`` set, a request's constraint starts
only after that marker appears in its output (a request's own ``start_after`` marker, set by
the chat route for reasoning models, takes precedence).

The manager changes only grammar state (a request's matcher, compile future and grammar
fields); what follows from it is returned as data for the scheduler to act on: the compiles
that finished or failed (:class:`CompilePoll`), and after a token a finish reason or a
jump-forward plan (:data:`~.token_advance.GrammarStep`).
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch

from ...fsm import (
    CompileBudget,
    GrammarCompiler,
    GrammarError,
    GrammarSpec,
    JumpForwardPlan,
    TokenVocabulary,
    WhitespacePolicy,
)
from ..wire.messages import FinishAbort, FinishStop, GrammarReq
from .advance_clock import AdvanceClock
from .budget_closing import close_within_budget, jump_fits, undo_jump
from .gate_reserve import GateReserve
from .jump_planner import JumpPlanner, PreparedJump
from .late_fills import LateFills, fill_late
from .mask_gate import StepMaskGate
from .mask_rows import StepMaskRows
from .mask_wait_stats import MaskWaitStats, RunQueueClock
from .request import Req, RequestError
from .speculative_share import SpeculativeShare
from .token_advance import AdvanceDeferred, GrammarStep

if TYPE_CHECKING:
    from ...kernels import KernelOps
    from ..server_args import ServerArgs

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class CompilePoll:
    """The compiles that finished since the last poll: requests now ready to be scheduled,
    and requests whose constraint failed to compile, with the message to report."""

    ready: list[Req] = field(default_factory=list)
    failed: list[tuple[Req, str]] = field(default_factory=list)


IDLE_WAIT_SECONDS = 0.005  # longest sleep when only held requests could run
# The compiler's worker computes masks in Python on this process's GIL. When the scheduler
# thread wants the GIL back (after a forward, after waiting for a mask), the interpreter
# makes the worker give it up only after the switch interval, 5 ms by default: longer than the
# whole mask-wait bound. Shorter slices bound that wait (a few us of switching each).
GIL_SWITCH_SECONDS = 0.0002


class GrammarManager:
    """Compiles, masks and advances the constraints of one scheduler's requests."""

    def __init__(self, args: ServerArgs, tokenizer: Any, vocab_size: int, eos_ids: list[int],
                 ops: KernelOps, clock: Callable[[], float] = time.perf_counter,
                 cpu_clock: Callable[[], float] = time.thread_time) -> None:
        self.args = args
        self.tokenizer = tokenizer
        self.vocab_size = vocab_size
        self.eos_ids = list(eos_ids)
        self.ops = ops
        self.enable_jump_forward = not args.disable_jump_forward
        # advances that would build automaton rows go to the compiler's worker (the request
        # sits steps out meanwhile) unless --grammar-advance-inline
        self.defer_advances = not args.grammar_advance_inline
        self._compiler: GrammarCompiler | None = None
        self._rows = StepMaskRows(vocab_size)  # the step's bitmask, filled by the gate
        self.mask_waits = MaskWaitStats()
        self.mask_wait_bound = args.grammar_mask_wait_ms / 1e3  # seconds, per step
        self.run_queue = RunQueueClock()  # the scheduler thread's time off the CPU
        self.advance_clock = AdvanceClock(self.run_queue)  # times the token advances
        # what the steps' mask time is measured on (wall, the thread's CPU; fakes in tests)
        self.clock, self.cpu_clock = clock, cpu_clock
        self.gate_reserve = GateReserve()  # what the gate keeps from sleeping, learnt
        self._gate: StepMaskGate | None = None  # the current step's (begin_step .. end_step)
        self._late = LateFills()  # fills the gate did not make, this step
        self.jumps = JumpPlanner(tokenizer, lambda: self.compiler)
        self._prepared: PreparedJump | None = None  # the deferred advance being made's plan
        self.speculative = SpeculativeShare(args.num_threads)  # look-ahead beside a step?

    @property
    def compiler(self) -> GrammarCompiler:
        """Built on first use: a vocabulary walk over the tokenizer costs a few hundred ms."""
        if self._compiler is None:
            from pathlib import Path

            vocab = TokenVocabulary.from_tokenizer(self.tokenizer, self.vocab_size, self.eos_ids)
            budget = CompileBudget(max_seconds=self.args.grammar_compile_timeout,
                                   max_states=self.args.grammar_max_states)
            cache = Path(self.args.grammar_cache_dir) if self.args.grammar_cache_dir else None
            self._compiler = GrammarCompiler(vocab, budget, cache, max_workers=1)
            sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_SECONDS))
        return self._compiler

    def prepare(self) -> None:
        """Build the compiler (its token vocabulary and trie) now rather than on the first
        constrained request: called before the start-up heap is frozen, so that those
        long-lived objects are frozen with it instead of being rescanned by every full
        collection while grammars compile (Handwritten---object9: half its wall time).
        No grammar exists yet, so nothing a cache could later evict is frozen (no leak)."""
        if self.tokenizer is None:
            return
        try:
            _ = self.compiler
        except Exception:  # noqa: BLE001 - never fail start-up: the first compile reports it
            logger.warning("grammar compiler not built at start-up", exc_info=True)

    def spec(self, g: GrammarReq) -> GrammarSpec:
        ws = WhitespacePolicy(mode=self.args.constrained_json_whitespace)
        if g.json_schema is not None:
            return GrammarSpec.json_schema(g.json_schema, whitespace=ws)
        if g.regex is not None:
            return GrammarSpec.regex(g.regex)
        if g.choices is not None:
            return GrammarSpec.choices(g.choices)
        if g.ebnf is not None:
            return GrammarSpec.ebnf(g.ebnf, self.args.ebnf_max_recursion_depth)
        if g.structural_tag is not None:
            return GrammarSpec.structural_tag(g.structural_tag, whitespace=ws)
        return GrammarSpec("json_object", whitespace=ws)

    # -- admission ------------------------------------------------------------------------

    def admit(self, req: Req, grammar: GrammarReq | None) -> None:
        """Start compiling ``req``'s constraint; a malformed one raises :class:`RequestError`."""
        if grammar is None:
            return
        try:
            future = self.compiler.compile_async(self.spec(grammar))
        except GrammarError as exc:
            raise RequestError(f"invalid constraint: {exc}") from None
        req.grammar_future = future
        req.grammar_after = grammar.start_after or self.args.reasoning_end_marker
        req.grammar_active = req.grammar_after is None
        if future.done():
            self._resolve(req)

    def _resolve(self, req: Req) -> None:
        future, req.grammar_future = req.grammar_future, None
        try:
            req.grammar = future.result().new_matcher()
            if close_within_budget(req):  # refuses a max_new_tokens below what must fit
                req.grammar.grammar.closing_used = True  # the warm-up computes closing rows
            self.prefetch(req)  # the first mask, before the request's prefill finishes
        except RequestError:
            raise
        except GrammarError as exc:
            raise RequestError(f"invalid constraint: {exc}") from None
        except Exception as exc:  # a compiler bug fails this request, never the scheduler
            logger.exception("compiling the constraint of %s failed", req.rid)
            raise RequestError(f"the constraint could not be compiled (internal error: "
                               f"{type(exc).__name__}: {exc})") from None

    def poll_compiles(self, waiting: Iterable[Req]) -> CompilePoll:
        """Attach finished compiles to their waiting requests; the owner fails the ones
        that errored (their matcher stays unset)."""
        poll = CompilePoll()
        for req in waiting:
            if req.grammar_future is None or not req.grammar_future.done():
                continue
            try:
                self._resolve(req)
            except RequestError as exc:
                poll.failed.append((req, str(exc)))
            else:
                poll.ready.append(req)
        return poll

    # -- per step -------------------------------------------------------------------------

    def begin_step(self) -> StepMaskGate:
        """The gate the owner asks, before the forward, whether each constrained request it
        would run has its mask ready (waiting at most ``--grammar-mask-wait-ms`` in all); a
        request admitted has its mask copied into the step's rows then, one held is
        prefetched again at once, ahead of other masks. From its first check to
        :meth:`StepMaskGate.leave` the gate keeps the compiler's worker off the GIL; where
        the forward takes every core, its speculative work is held off through the forward
        (:meth:`forward_hold`, :mod:`.speculative_share`)."""
        if self._gate is not None:  # a step that raised before end_step: never left held
            self._gate.leave()
        self._rows.clear()
        self._late = LateFills()
        self.speculative.forward_ended()  # a forward that raised: never left held
        background = self._compiler.background if self._compiler is not None else None
        self._gate = StepMaskGate(self.mask_wait_bound, self.mask_waits, self.prefetch,
                                  self._rows.fill, self.gate_reserve, self.run_queue,
                                  self.clock, self.cpu_clock, background)
        return self._gate

    @contextmanager
    def forward_hold(self) -> Iterator[None]:
        """Hold the worker's speculative work off for the ``with`` block (the forward), where
        the forward takes every core (:mod:`.speculative_share`). Only the forward: the
        scheduler's own grammar work (drafts, verify masks, advances) may wait for the
        automaton's lock, which a parked speculative mask holds."""
        self.speculative.forward_started(self._compiler)
        try:
            yield
        finally:
            self.speculative.forward_ended()

    def end_step(self, ran: bool) -> None:
        """Record the step's mask time and holds. ``ran``: a forward ran; when none did
        because every request able to run was held, sleep until one of their masks is ready
        (at most :data:`IDLE_WAIT_SECONDS`) instead of spinning the scheduler loop."""
        self.speculative.forward_ended()
        gate, self._gate = self._gate, None
        if gate is None:
            return
        gate.close()
        self.mask_waits.held(len(gate.held))
        late, self._late = self._late, LateFills()
        self._rows.clear()
        if gate.checked or late.rows:
            self.mask_waits.record(gate.spent + late.seconds, late.cold,
                                   gate.preempted + late.preempted, gate.waited,
                                   gate.gc_paused + late.gc_paused, gate.blocked,
                                   cpu=gate.cpu_spent + late.cpu)
        self.mask_waits.close_step()  # the step's masks and advances, as one grammar time
        self.advance_clock.new_step()
        if not ran and gate.held:
            start = time.perf_counter()
            req = gate.held[0]
            pending = req.grammar_pending
            if pending is not None:
                pending.wait(req.grammar, IDLE_WAIT_SECONDS)
            elif req.grammar_closing:  # its closing row too
                req.grammar.wait_mask_ready(IDLE_WAIT_SECONDS, _remaining(req))
            else:
                req.grammar.wait_mask_ready(IDLE_WAIT_SECONDS)
            self.mask_waits.idle_wait_seconds += time.perf_counter() - start

    def stats(self) -> dict[str, float | int]:
        """The steps' mask waits (:meth:`MaskWaitStats.summary`), their grammar time as thread
        CPU time (:meth:`MaskWaitStats.cpu_summary`), the jump-forwards the worker planned
        ahead and those the scheduler committed (:class:`JumpPlanner`), then how often, and
        how long in all, the compiler's worker parked for the gate."""
        hold = self._compiler.background if self._compiler is not None else None
        return {**self.mask_waits.summary(), **self.mask_waits.cpu_summary(),
                "grammar_jumps_planned_ahead": self.jumps.prepared,
                "grammar_jumps_committed": self.jumps.committed,
                "grammar_worker_pauses": hold.pauses if hold else 0,
                "grammar_worker_paused_ms": 1e3 * hold.paused_seconds if hold else 0.0}

    def apply_masks(self, reqs: list[Req], logits: torch.Tensor) -> list[tuple[Req, Exception]]:
        """Disallow, in place, every token the active grammars forbid (one batched call).

        The masks are the ones the step's gate copied; a row it did not fill (no gate, or a
        request it did not check) is filled here, counted as the step's late fills. A budget
        hit sets the request's ``grammar_error`` (it ends with that message); any other
        exception while filling one mask is returned with its request, for the owner to fail
        that request alone. Either way that row is left unmasked and the batch goes on.
        """
        rows = [i for i, r in enumerate(reqs) if r.grammar is not None and r.grammar_active]
        if not rows:
            return []
        constrained = [reqs[i] for i in rows]
        late = [r for r in constrained if not self._rows.has(r)]
        if late:
            self._late = self._late.plus(fill_late(self._rows, late, self.clock,
                                                   self.cpu_clock, self.run_queue))
        masks, faults = self._rows.gather(constrained)
        index = torch.tensor(rows, dtype=torch.int64, device=logits.device)
        self.ops.apply_token_bitmask(logits, masks.to(logits.device), index)
        if self._gate is None:  # no step open (a caller outside the scheduler's loop)
            late, self._late = self._late, LateFills()
            self.mask_waits.record(late.seconds, late.cold, late.preempted, 0.0, late.gc_paused,
                                   cpu=late.cpu)
            self.mask_waits.close_step()
            self._rows.clear()
        return faults

    def advancing(self) -> AbstractContextManager[None]:
        """The block in which a step's sampled tokens advance their grammars (the output
        processor's loop over the step's requests): the compiler's worker is held off the
        GIL, and woken only at the end for the prefetches asked for (see
        :meth:`GrammarCompiler.held_quietly`). Else it takes the GIL (on one core, the CPU)
        from the scheduler at every switch interval and every call that releases it (a
        tokenizer's encode in a jump-forward plan), and each prefetch wakes it: advances
        that cost 0.05-0.4 ms of CPU had a p99 of 3.7-3.9 ms on an idle core
        (``benchmarks/json_e2e.py --scheduler``). An advance that may take a grammar's
        lock, which the parked worker may hold, lends it the GIL first (:meth:`_lent`)."""
        if self._compiler is None:
            return nullcontext()
        return self._compiler.held_quietly()

    @contextmanager
    def _lent(self) -> Iterator[None]:
        """Work that may wait for a grammar's lock: a hold in force (the gate's, or
        :meth:`advancing`'s) is lifted meanwhile, so that a worker parked inside a mask
        finishes it and frees the lock instead of waiting out its park's cap."""
        compiler = self._compiler
        if compiler is None or not compiler.background.held:
            yield
            return
        compiler.release_background()
        try:
            yield
        finally:
            compiler.hold_background()

    def after_token(self, req: Req, token: int) -> GrammarStep:
        """Advance ``req``'s grammar by its new token (already appended to its output).

        Returns a finish reason if the output must end here, a jump-forward plan for the
        owner to apply, :class:`AdvanceDeferred` when the advance would build automaton rows
        on this thread (then the compiler's worker prepares it and the owner makes it later,
        :meth:`resume_advance`; with ``--grammar-advance-inline`` it is made here), or None.
        """
        if req.grammar is None:
            return None
        if not req.grammar_active:
            self._maybe_activate(req)
            return None
        mark = self.advance_clock.start()
        jump = self._jumps(req)
        ready = req.grammar.advance_ready(token, jump)
        if self.defer_advances and not ready:
            self.compiler.prefetch_advance(req.grammar, token)
            # the jump after it planned by the worker too, queued behind the advance's rows
            prepared = self.jumps.prepare(req, token) if jump else None
            req.grammar_pending = AdvanceDeferred(token, jump, prepared=prepared)
            self.advance_clock.record(self.mask_waits, mark, deferred=True)
            return req.grammar_pending
        return self._timed_advance(req, token, mark, ready)

    def resume_advance(self, req: Req) -> GrammarStep:
        """Make the advance ``req`` deferred (:class:`AdvanceDeferred`), once the gate says it
        is ready; what it returns is what :meth:`after_token` would have returned then."""
        pending, req.grammar_pending = req.grammar_pending, None
        assert pending is not None, "no deferred advance to resume"
        error = req.grammar.advance_error(pending.token)
        if error is not None:  # the worker hit a budget preparing it: the same message
            req.grammar_error = str(error)
            return self.error_reason(req)
        self._prepared = pending.prepared  # the jump the worker planned: committed if it fits
        try:
            return self._timed_advance(req, pending.token, self.advance_clock.start(), True)
        finally:
            self._prepared = None

    def _timed_advance(self, req: Req, token: int, mark: tuple[float, float],
                       ready: bool) -> GrammarStep:
        """Make the advance; ``ready``: it builds nothing (:meth:`GrammarMatcher.advance_ready`),
        else (inline) the worker is lent the GIL meanwhile (:meth:`_lent`)."""
        try:
            with nullcontext() if ready else self._lent():  # inline: may build rows
                step = self._advance(req, token)
        except GrammarError as exc:  # the lazy automaton grew past a budget
            self.advance_clock.record(self.mask_waits, mark)
            req.grammar_error = str(exc)
            return self.error_reason(req)
        if isinstance(step, AdvanceDeferred):  # undone: the jump's budget check searches
            req.grammar_pending = step
            self.prefetch(req)
            self.advance_clock.record(self.mask_waits, mark, deferred=True)
            return step
        self.advance_clock.record(self.mask_waits, mark)
        if not isinstance(step, (FinishStop, FinishAbort)):
            self.prefetch(req)
        return step

    def _jumps(self, req: Req) -> bool:
        """Whether ``req``'s advances plan jump-forwards: not for a speculating request in a
        step that drafts, whose forced text is proposed as drafts instead (the model keeps its
        tokenization); in a step too wide to draft, as without speculation."""
        return (self.enable_jump_forward and not req.return_logprob
                and (not req.speculative or req.plain_step))

    def prefetch(self, req: Req) -> None:
        """Queue the mask of ``req``'s current state (and of the states one token on) for
        the compiler's worker, so that it is usually ready before the next step needs it.
        Never blocks. Called after each token, after a jump-forward too (planning a jump
        already advances the matcher, so the state prefetched is the one after the jump).
        A request whose advance is deferred waits for that instead: it is queued again, at
        the front of the worker's work."""
        if req.grammar is None or not req.grammar_active:
            return
        pending = req.grammar_pending
        if pending is not None:  # what it waits for is its advance
            self.compiler.prefetch_advance(req.grammar, pending.token)
            if pending.closing_state is not None:
                self.compiler.prefetch_closing_dist(req.grammar.grammar, pending.closing_state)
        elif req.grammar_closing:  # its closing row only where the budget left may cut
            self.compiler.prefetch(req.grammar, _remaining(req))
        else:
            self.compiler.prefetch(req.grammar)

    @staticmethod
    def error_reason(req: Req) -> FinishAbort:
        """The finish reason of a request whose constraint failed while decoding."""
        return FinishAbort(message=f"constraint failed while decoding: {req.grammar_error}")

    def _advance(self, req: Req, token: int) -> GrammarStep:
        if not req.grammar.accept_token(token):
            return FinishAbort(message=f"token {token} is not allowed by the constraint "
                                       f"(grammar state lost)")
        if req.grammar.must_end():
            # Only EOS could follow: stop without sampling it. What ended the output is the
            # token that completed the grammar, reported as an EOS would be (the last token).
            return FinishStop(matched=token)
        if self._jumps(req):
            return self._jump_or_defer(req, token, self._prepared)
        return None

    def _maybe_activate(self, req: Req) -> None:
        marker = req.grammar_after
        assert marker is not None
        tail = self.tokenizer.decode(req.output_ids[-(len(marker) + 2):])
        if marker in tail:
            req.grammar_active = True
            req.grammar_start = req.num_output

    def jump(self, req: Req, prepared: PreparedJump | None = None) -> JumpForwardPlan | None:
        """Plan the text the grammar forces next and advance the matcher over it
        (:meth:`JumpPlanner.jump`: the last few output tokens retokenized with the forced
        text, trailing extendable tokens held back; ``prepared``, the worker's plan, committed
        where it fits); the owner applies the plan to the output and prefills the new tokens
        in one step. Skipped for requests that asked for logprobs: forced tokens are not
        sampled."""
        plan = self.jumps.jump(req, prepared)
        if plan is not None and req.grammar_closing and not self._jump_fits(req, plan):
            undo_jump(req, plan)
            return None
        return plan

    def _jump_or_defer(self, req: Req, token: int, prepared: PreparedJump | None
                       ) -> JumpForwardPlan | AdvanceDeferred | None:
        """:meth:`jump`; but where the request closes its output within its budget and the
        jump ends at a state whose closing distance is not computed (a search, under the
        grammar's lock), the jump and the token's accept are undone and the advance is
        deferred to the compiler's worker (:class:`AdvanceDeferred` with ``closing_state``):
        made again, the same plan (kept, not planned again), once the distance is there
        (unless inline)."""
        if not (req.grammar_closing and self.defer_advances):
            return self.jump(req, prepared)
        forced = req.grammar.jump_forward_string()
        plan = self.jumps.jump(req, prepared)
        if plan is None:
            return None
        state = req.grammar.state
        if not req.grammar.grammar.closing_dist_ready(state):
            undo_jump(req, plan)
            req.grammar.rollback(1)  # the token's accept: made again when resumed
            made = PreparedJump.made(req.output_ids[req.grammar_start:], forced, plan)
            return AdvanceDeferred(token, True, closing_state=state, prepared=made)
        if not self._jump_fits(req, plan):
            undo_jump(req, plan)
            return None
        return plan

    def _jump_fits(self, req: Req, plan: JumpForwardPlan) -> bool:
        """:func:`jump_fits`, lending the worker the GIL when the distance it needs is not
        cached (a search under the grammar's lock)."""
        closing = getattr(req.grammar.grammar, "closing", None)
        if closing is not None and closing.cached_dist(req.grammar.state) is not None:
            return jump_fits(req, plan)
        with self._lent():
            return jump_fits(req, plan)

    def release(self, req: Req) -> None:
        req.grammar = None
        req.grammar_future = None

    def flush(self) -> None:
        """Compiled grammars stay cached (they depend only on the spec and vocabulary)."""
        return None


def _remaining(req: Req) -> int:
    """The tokens ``req`` may still output: the budget its mask is cut to (``mask_rows``)."""
    return req.sampling.max_new_tokens - req.num_output
