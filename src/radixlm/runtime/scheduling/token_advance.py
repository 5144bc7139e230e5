"""What a constrained request's grammar advance by one sampled token leads to.

:data:`GrammarStep` is what :meth:`~.grammar_manager.GrammarManager.after_token` (and
``resume_advance``) return for the owner to act on; :class:`AdvanceDeferred` is the outcome of
an advance handed to the compiler's worker. Imports only the fsm package and wire messages.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Union

from ...fsm import JumpForwardPlan
from ..wire.messages import FinishReason


@dataclass(frozen=True)
class AdvanceDeferred:
    """A token whose grammar advance would have built automaton rows (or computed a mask)
    on the scheduler's thread: the compiler's worker prepares it instead, and the request,
    its token kept in its output, sits out steps until the advance is ready (the gate's
    :meth:`~.mask_gate.StepMaskGate.advance_ready`), when the owner makes it
    (:meth:`~.grammar_manager.GrammarManager.resume_advance`). ``jump``: whether the advance
    plans a jump-forward, so whether the forced run after the token must be ready too.
    ``closing_state``: set when the advance was begun and undone because the jump it plans
    ends at a state whose closing distance (the budget check of a request that closes its
    output within ``max_new_tokens``: :mod:`.budget_closing`) is not computed yet: a search
    the worker makes. Never made with ``--grammar-advance-inline``. ``prepared``: the
    jump-forward after the token, planned by the worker too (a
    :class:`~.jump_planner.PreparedJump`, set once made): the advance waits for it, so that
    the scheduler only commits the plan."""

    token: int
    jump: bool
    closing_state: int | None = None
    prepared: Any = None

    def ready(self, matcher: Any) -> bool:
        """Whether the advance can be made now building nothing, searching nothing and
        planning nothing."""
        return matcher.advance_ready(self.token, self.jump) and (
            self.closing_state is None or matcher.grammar.closing_dist_ready(self.closing_state)
        ) and (self.prepared is None or self.prepared.done.is_set())

    def wait(self, matcher: Any, seconds: float) -> bool:
        """Sleep (the GIL released) at most about ``seconds`` for :meth:`ready`."""
        end = time.perf_counter() + seconds
        if not matcher.wait_advance_ready(self.token, self.jump, seconds):
            return False
        if self.closing_state is not None and not matcher.grammar.wait_closing_dist(
                self.closing_state, end - time.perf_counter()):
            return False
        return self.prepared is None or self.prepared.done.wait(
            max(0.0, end - time.perf_counter()))


# After a token: a finish reason (the grammar ended the output, or the constraint failed), or
# a jump-forward plan to apply (replace ``rollback`` output tokens by ``tokens``), or the
# advance deferred to the compiler's worker, or None.
GrammarStep = Union[FinishReason, JumpForwardPlan, AdvanceDeferred, None]  # noqa: UP007
