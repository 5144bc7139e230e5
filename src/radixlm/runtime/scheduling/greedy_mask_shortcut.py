"""The greedy mask shortcut: a verify row whose unmasked greedy pick the constraint allows
needs no token mask.

A constraint's mask only removes tokens: their logits become ``-inf`` and every other logit
is left as it was. The sampler's greedy pick is the first maximum of the row after steps that
act on each token alone (penalties, logit bias, the min-new-tokens ban), none of which lifts a
``-inf`` above a logit it did not also lift in the unmasked row. So if the unmasked row's
first maximum ``t`` is allowed, the masked row keeps ``t``'s value, every token before ``t``
stays below it (unchanged, ``-inf``, or the ban's floor, which ``t`` already beat), and
``t`` is the masked row's first maximum too (``tests/runtime/scheduling/
test_greedy_mask_shortcut.py`` checks the rule on random logits, masks, ties and bans).
Only a refused pick needs the mask, and only that row's.

Where it applies (:func:`shortcut_applies`): greedy rows (no noise, so no generator draw is
skipped), no logprobs asked (they are those of the masked distribution), an active
constraint. A row's pick holds (:func:`pick_holds`) where the matcher's
:meth:`~radixlm.fsm.GrammarMatcher.accept_token`, the rule the mask is built from, accepts it
(a check that hits the grammar's budget counts as refused: the mask decides) and, for an
output closed within ``max_new_tokens`` (:mod:`.budget_closing`), the state's closing cut is
known to remove nothing at that budget (its span or row computed: else the mask decides, and
whether the cut removed a token is the mask's to say). One difference stays: a draft state
whose mask would exceed the grammar's budget ends the chain on the masked path (the request
fails at its next step, as without speculation); with the shortcut an allowed pick is kept
there and the mask is computed at the next state.
"""


from __future__ import annotations

from ...fsm import GrammarError, GrammarMatcher
from .request import Req


def shortcut_applies(req: Req) -> bool:
    """Whether ``req``'s verify rows may skip their masks (see module doc)."""
    return (req.sampling.is_greedy and not req.return_logprob and req.grammar is not None
            and req.grammar_active and req.grammar_error is None)


def pick_holds(req: Req, matcher: GrammarMatcher, token: int, remaining: int) -> bool:
    """Whether ``token``, a row's unmasked greedy pick at ``matcher``'s state with
    ``remaining`` tokens left (this one included), is the masked pick (see module doc)."""
    if not allows(matcher, token):
        return False
    if not req.grammar_closing or matcher.is_finished():
        return True
    return matcher.grammar.closing.cuts(matcher.state, remaining) is False


def allows(matcher: GrammarMatcher, token: int) -> bool:
    """Whether ``matcher``'s constraint accepts ``token`` now (``matcher`` left unchanged;
    a check that hits the grammar's budget answers False)."""
    try:
        if not matcher.accept_token(token):
            return False
    except GrammarError:
        return False
    matcher.rollback(1)
    return True
