"""What a constrained request's grammar advance by one sampled token leads to.

:data:`GrammarStep` is what :meth:`~.grammar_manager.GrammarManager.after_token` (and
``resume_advance``) return for the owner to act on; :class:`AdvanceDeferred` is the outcome of
an advance handed to the compiler's worker. Imports only the fsm package and wire messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union

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
    Never made with ``--grammar-advance-inline``."""

    token: int
    jump: bool


# After a token: a finish reason (the grammar ended the output, or the constraint failed), or
# a jump-forward plan to apply (replace ``rollback`` output tokens by ``tokens``), or the
# advance deferred to the compiler's worker, or None.
GrammarStep = Union[FinishReason, JumpForwardPlan, AdvanceDeferred, None]  # noqa: UP007
