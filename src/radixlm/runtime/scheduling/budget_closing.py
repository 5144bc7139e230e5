"""Closing a constrained output within ``max_new_tokens`` (sampling param
``close_within_max_tokens``, on by default).

Without it, a JSON (regex, EBNF, choice, tool-call) output whose ``max_new_tokens`` runs out
mid-value ends cut, invalid. With it, the constraint's matcher knows, per state, how many
tokens surely complete the output (:meth:`~radixlm.fsm.GrammarMatcher.tokens_to_close`: a
completion found by a search, cut into the fewest tokens); near the limit each step's mask
keeps only the tokens after which a completion still fits
(:meth:`~radixlm.fsm.GrammarMatcher.close_within`, applied where the step's mask rows are
filled, :mod:`.mask_rows`). So the output is a complete, valid instance whenever
``max_new_tokens`` is at least the constraint's shortest output (in that bound), and a
request whose ``max_new_tokens`` is below it is refused before any work (the error names
the length needed). A jump-forward that would not leave room to close is not taken.

Finish reason: an output the budget shaped (some step's mask lost a token the constraint
allowed) ends with ``length`` and the message :data:`BUDGET_CLOSED` in
``meta_info.finish_reason``: the model did not choose to end there, its values may be cut
short, so a client reading ``length`` as "raise max_tokens for the full answer" is right, and
the text now parses. An output the budget never narrowed ends as it would without closing.

Not closed (today's behaviour, with a log line): the constraint starts after a reasoning
marker (its start, so its budget, is unknown), ``max_new_tokens`` is 0, or no path of
spellable completion was found within the search's bound.
"""

from __future__ import annotations

import logging

from ...fsm import JumpForwardPlan
from ..wire.messages import FinishLength, FinishReason, FinishStop
from .request import Req, RequestError

logger = logging.getLogger(__name__)

BUDGET_CLOSED = ("closed within max_new_tokens by the constraint: the output is complete and "
                 "valid, its values possibly shortened to fit")


def close_within_budget(req: Req) -> bool:
    """Whether ``req`` (its matcher just attached) closes its output within its budget; sets
    ``req.grammar_closing``. Raises :class:`RequestError` when ``max_new_tokens`` is below
    the tokens the constraint's shortest output needs (computed by the compiler's worker)."""
    p = req.sampling
    if not p.close_within_max_tokens or req.grammar_after is not None or \
            p.max_new_tokens == 0:
        return False
    tokens_to_close = getattr(req.grammar, "tokens_to_close", None)
    if tokens_to_close is None:  # a matcher that cannot tell (a test double): not closed
        return False
    need = tokens_to_close()
    if need is None:
        logger.info("request %s: its output cannot be promised to close within "
                    "max_new_tokens (no spellable completion of the constraint found "
                    "within the search's bound); it may be cut", req.rid)
        return False
    if need > p.max_new_tokens:
        raise RequestError(
            f"max_new_tokens ({p.max_new_tokens}) is below the {need} tokens the constraint's "
            f"shortest output needs: raise max_tokens to at least {need}, or set "
            f"close_within_max_tokens=false to have the output cut at the limit")
    req.grammar_closing = True
    return True


def jump_fits(req: Req, plan: JumpForwardPlan) -> bool:
    """Whether ``req``'s output can still close within its budget after ``plan`` (already
    applied to the matcher, not yet to the output)."""
    need = req.grammar.tokens_to_close()
    after = req.num_output - plan.rollback + len(plan.tokens)
    return need is None or need <= req.sampling.max_new_tokens - after


def undo_jump(req: Req, plan: JumpForwardPlan) -> None:
    """Put ``req``'s matcher back where it was before ``plan`` was applied to it."""
    n = req.num_output
    tail = list(req.output_ids[n - plan.rollback: n]) if plan.rollback else []
    req.grammar.rollback(len(plan.tokens))
    if not req.grammar.accept_tokens(tail):  # they were accepted before: cannot happen
        raise RuntimeError("undoing a jump-forward: the output's tokens were refused")


def budget_finish(req: Req, reason: FinishReason) -> FinishReason:
    """``reason``, or ``length`` with :data:`BUDGET_CLOSED` when the budget shaped ``req``'s
    output and it ended at the limit or where the constraint ended (a stop string or an abort
    keeps its reason)."""
    if not req.budget_closed:
        return reason
    at_limit = isinstance(reason, FinishLength) and reason.message is None
    grammar_end = isinstance(reason, FinishStop) and isinstance(reason.matched, int)
    if at_limit or grammar_end:
        return FinishLength(length=req.sampling.max_new_tokens, message=BUDGET_CLOSED)
    return reason
