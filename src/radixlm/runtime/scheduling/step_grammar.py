"""The grammar side of the start of a scheduler step, before its batch is chosen.

Each step first attaches the compiles that finished (the failed ones are to be failed), opens
the step's mask gate (:meth:`GrammarManager.begin_step`), and makes the grammar advances that
were deferred to the compiler's worker (:class:`~.token_advance.AdvanceDeferred`) when the
gate finds them ready within the step's mask-wait bound; the others' requests stay held.

:class:`StepGrammar` changes grammar state and requests' outputs (through the grammar manager
and the output processor) but never the queues or memory, and holds no reference to the
scheduler: it returns what happened (:class:`GrammarStart`) and the scheduler acts on it
(fails, retires, sends), in the order given.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from ..wire.messages import ReqOut
from .grammar_manager import GrammarManager
from .mask_gate import StepMaskGate
from .output_processor import OutputProcessor
from .request import Req

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RequestFailure:
    """A request to fail (without caching its KV), with the error to report; ``code`` as
    :class:`~..wire.messages.ErrorOut`'s: ``invalid_request`` (the client's constraint) or
    ``internal`` (a bug)."""

    req: Req
    message: str
    code: str = "invalid_request"


@dataclass(frozen=True)
class GrammarStart:
    """What the start of a step found, for the scheduler to act on.

    ``gate``: the step's mask gate, which the scheduler asks whether each constrained request
    it would run may run, and leaves after its last check. ``failed``: the requests whose
    constraint failed to compile, then those whose deferred advance raised. ``outs``: the
    outputs the advances made owe (a finished request's last one, or a jump's forced tokens
    when streaming), to send before the step's own. ``finished``: the requests an advance
    ended (their ``finish_reason`` set, their last output among ``outs``): to be retired.
    """

    gate: StepMaskGate
    failed: list[RequestFailure] = field(default_factory=list)
    outs: list[ReqOut] = field(default_factory=list)
    finished: list[Req] = field(default_factory=list)


class StepGrammar:
    """Starts the grammar side of each step for one scheduler (see module doc)."""

    def __init__(self, grammar: GrammarManager, output: OutputProcessor) -> None:
        self.grammar = grammar
        self.output = output  # makes a resumed advance's consequences (jump, finish, output)

    def start(self, running: list[Req], waiting: list[Req]) -> GrammarStart:
        """Poll the compiles of ``waiting``, open the step's gate, and make the deferred
        advances of ``running`` then ``waiting`` that the gate finds ready."""
        failed = [RequestFailure(req, message)
                  for req, message in self.grammar.poll_compiles(waiting).failed]
        start = GrammarStart(self.grammar.begin_step(), failed)
        for req in [r for r in running + waiting if r.grammar_pending is not None]:
            if start.gate.advance_ready(req):
                self._resume(req, start)
        return start

    def _resume(self, req: Req, start: GrammarStart) -> None:
        """Make ``req``'s deferred advance and record what follows in ``start``; one that
        raises fails its request alone."""
        try:
            out = self.output.resume_grammar(req)
        except Exception as exc:  # a bug in one request's advance never stops the engine
            logger.exception("advancing the constraint of %s failed", req.rid)
            start.failed.append(RequestFailure(req, code="internal", message=(
                f"internal error while advancing the constraint: "
                f"{type(exc).__name__}: {exc}")))
            return
        if out is not None:
            start.outs.append(out)
        if req.finish_reason is not None:
            start.finished.append(req)
