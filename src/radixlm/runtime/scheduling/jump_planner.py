"""Jump-forward plans of the scheduler's constrained requests, made ahead where they can be.

A jump-forward plan (:func:`~radixlm.fsm.plan_jump_forward`) re-tokenizes the last output
tokens with the text the grammar forces next: a tokenizer encode and a few decodes, 0.1-0.3 ms
of the scheduler thread's time per jump, the largest part of its grammar advances (profiled
on ``benchmarks/json_e2e.py --scheduler smollm2``). A token whose advance is deferred to the
compiler's worker (:class:`~.token_advance.AdvanceDeferred`) waits for it anyway, and the plan
depends only on what is fixed while it waits (the matcher's state before the token, the token,
the constrained output so far), so the worker makes the plan there too, on a copy of the
matcher (:class:`PreparedJump`), and the scheduler only commits it when it makes the advance:
it checks that the forced text and the output are the ones the plan was made from, and
applies it to the matcher (:func:`~radixlm.fsm.apply_jump_forward`, walks through built
rows). Where the check fails, or the worker could not make it, the plan is made on the
scheduler's thread as before: the plan, and so every token, is the same either way.
Encodes go through :class:`~.forced_text_encoder.ForcedTextEncoder`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ...fsm import JumpForwardPlan, apply_jump_forward, plan_jump_forward
from .forced_text_encoder import ForcedTextEncoder
from .request import Req

if TYPE_CHECKING:
    from ...fsm import GrammarCompiler, GrammarMatcher

logger = logging.getLogger(__name__)


class PreparedJump:
    """The jump-forward plan after one deferred token, made on the compiler's worker: ``done``
    is set once it is (``plan`` None: nothing to force, or no safe plan); ``failed``: the
    worker could not tell (an error), so the scheduler plans it itself."""

    __slots__ = ("matcher", "token", "segment", "done", "forced", "plan", "failed")

    def __init__(self, matcher: GrammarMatcher | None, token: int, segment: list[int]) -> None:
        self.matcher = matcher  # a copy at the state before ``token``: the worker's own
        self.token = token
        self.segment = segment  # the constrained output, ``token`` included
        self.done = threading.Event()
        self.forced = ""
        self.plan: JumpForwardPlan | None = None
        self.failed = False

    @classmethod
    def made(cls, segment: list[int], forced: str, plan: JumpForwardPlan | None
             ) -> PreparedJump:
        """One already made (by the scheduler, before it deferred the advance again)."""
        prepared = cls(None, -1, segment)
        prepared.forced, prepared.plan = forced, plan
        prepared.done.set()
        return prepared

    def fits(self, forced: str, segment: Sequence[int]) -> bool:
        """Whether this plan is the one planning ``forced`` after ``segment`` would make."""
        return self.done.is_set() and not self.failed and forced == self.forced and \
            self.segment == segment


class JumpPlanner:
    """Plans jump-forwards for one scheduler: on its thread (:meth:`jump`), or ahead on the
    compiler's worker for a deferred advance (:meth:`prepare`)."""

    def __init__(self, tokenizer: Any, compiler: Callable[[], GrammarCompiler]) -> None:
        self.encode = ForcedTextEncoder(tokenizer)
        self._compiler = compiler  # built on first use by the grammar manager
        self.prepared = 0  # plans the worker made, since start
        self.committed = 0  # of them, the scheduler committed (the rest it planned again)

    def decode(self, ids: Sequence[int]) -> str:
        """The plain concatenating decode :func:`plan_jump_forward` needs."""
        return self._compiler().vocab.decode_bytes(ids).decode("utf-8", errors="replace")

    def _plan(self, segment: Sequence[int], forced: str) -> JumpForwardPlan | None:
        extendable = self._compiler().vocab.extendable
        return plan_jump_forward(segment, forced, self.encode, self.decode,
                                 extendable=lambda t: bool(extendable[t]))

    def jump(self, req: Req, prepared: PreparedJump | None = None) -> JumpForwardPlan | None:
        """Plan the text ``req``'s grammar forces next and advance its matcher over it
        (:func:`~radixlm.fsm.jump_forward`), committing ``prepared`` when it is that plan;
        None leaves the matcher as it was."""
        matcher = req.grammar
        forced = matcher.jump_forward_string()
        if not forced:
            return None
        segment = req.output_ids[req.grammar_start:]
        if prepared is not None and prepared.fits(forced, segment):
            plan = prepared.plan
            self.committed += 1
        else:
            plan = self._plan(segment, forced)
        if plan is None or not apply_jump_forward(matcher, plan):
            return None
        return plan

    def prepare(self, req: Req, token: int) -> PreparedJump:
        """Have the compiler's worker plan the jump after ``req``'s deferred ``token`` (its
        matcher still at the state before it, the token in its output)."""
        prepared = PreparedJump(req.grammar.copy(), token, req.output_ids[req.grammar_start:])
        self._compiler().run_in_background(self._prepare, prepared)
        return prepared

    def _prepare(self, prepared: PreparedJump) -> None:
        """The worker's side: accept the token on the copy, and plan from there unless only
        EOS can follow (building what that needs under the grammar's lock, as the advance's
        own warm-up does: usually already built, it was queued first)."""
        try:
            matcher = prepared.matcher
            with matcher.grammar.dfa.lock:
                if not matcher.accept_token(prepared.token) or matcher.must_end():
                    return
                prepared.forced = matcher.jump_forward_string()
            if prepared.forced:
                prepared.plan = self._plan(prepared.segment, prepared.forced)
            self.prepared += 1
        except Exception:  # noqa: BLE001 - the scheduler plans it itself and reports errors
            prepared.failed = True
            logger.debug("planning a jump-forward ahead failed", exc_info=True)
        finally:
            prepared.matcher = None  # its history: not kept while the request waits
            prepared.done.set()
