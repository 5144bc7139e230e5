"""Jump-forward planning: turn a forced string into tokens, with token healing.

The scheduler calls :func:`plan_jump_forward` when ``matcher.jump_forward_string()`` is not
empty. The plan re-tokenizes the last few output tokens together with the forced text (so the
model sees a canonical tokenization across the boundary, not the forced text tokenized on its
own), keeps back the trailing tokens a longer vocabulary token could still extend (they are
decoded normally next), and says how many output tokens to drop and which to append.

Invariant (tested): ``decode(kept_output + plan.tokens) == decode(output) + plan.jump_text``
with ``plan.jump_text`` a non-empty prefix of the jump string, so the text only ever grows
(streamed text stays monotone even when tokens are replaced). The rest of the jump string is
still forced by the grammar and is generated (or jumped) on the following steps.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .matcher import GrammarMatcher

REPLACEMENT = "\ufffd"


@dataclass(frozen=True)
class JumpForwardPlan:
    """Drop the last ``rollback`` output tokens, then append ``tokens`` (forced).

    ``text``: the decoded text of the re-tokenized tail (kept tokens + ``tokens``);
    ``jump_text``: the part of the jump string the appended tokens add (never empty).
    """

    rollback: int
    tokens: tuple[int, ...]
    text: str
    jump_text: str


def plan_jump_forward(
    output_ids: Sequence[int],
    jump: str,
    encode: Callable[[str], list[int]],
    decode: Callable[[Sequence[int]], str],
    *,
    context_tokens: int = 4,
    holdback_tokens: int = 2,
    holdback_bytes: int = 0,
    extendable: Callable[[int], bool] | None = None,
) -> JumpForwardPlan | None:
    """Plan a jump over the forced string ``jump``; None when nothing safe can be forced.

    ``output_ids``: the constrained segment's output so far (never prompt tokens, so the
    prompt can never be re-tokenized). ``encode`` must not add special tokens; ``decode``
    must be the plain concatenating decode. The last ``context_tokens`` output tokens are
    re-tokenized with the jump; at least ``holdback_tokens`` trailing tokens and
    ``holdback_bytes`` bytes are held back, plus any trailing token ``extendable`` says a
    longer vocabulary token could extend.
    """
    if not jump:
        return None
    k = min(context_tokens, len(output_ids))
    while k < len(output_ids) and decode(output_ids[len(output_ids) - k:]).startswith(
            REPLACEMENT):
        k += 1  # start the tail on a character boundary
    tail = list(output_ids[len(output_ids) - k:])
    old = decode(tail)
    if REPLACEMENT in old:
        return None
    new_text = old + jump
    ids = list(encode(new_text))
    if decode(ids) != new_text:
        return None  # the tokenizer does not round-trip this text
    cut = _holdback_cut(ids, decode, holdback_tokens, holdback_bytes, extendable)
    keep = ids[:cut]
    kept_text = decode(keep)
    if len(kept_text) <= len(old) or not new_text.startswith(kept_text) or \
            not kept_text.startswith(old):
        return None
    common = 0
    while common < min(len(tail), len(keep)) and tail[common] == keep[common]:
        common += 1
    tokens = tuple(keep[common:])
    if not tokens:
        return None
    return JumpForwardPlan(rollback=len(tail) - common, tokens=tokens, text=kept_text,
                           jump_text=kept_text[len(old):])


def _holdback_cut(ids: list[int], decode: Callable[[Sequence[int]], str], tokens: int,
                  min_bytes: int, extendable: Callable[[int], bool] | None) -> int:
    """Index after the last token to force: hold back ``tokens`` tokens, at least
    ``min_bytes`` bytes, and any extendable token at the end of what is forced."""
    cut = max(len(ids) - tokens, 0)
    while cut > 0 and len(decode(ids[cut:]).encode("utf-8")) < min_bytes:
        cut -= 1
    while cut > 0 and extendable is not None and extendable(ids[cut - 1]):
        cut -= 1
    return cut


def apply_jump_forward(matcher: GrammarMatcher, plan: JumpForwardPlan) -> bool:
    """Roll the matcher back and advance it over the plan's tokens; on any refusal the
    matcher is left exactly as it was and False is returned (skip the jump)."""
    if plan.rollback > matcher.num_tokens:
        return False
    trial = matcher.copy()
    trial.rollback(plan.rollback)
    if not trial.accept_tokens(list(plan.tokens)):
        return False
    matcher.rollback(plan.rollback)
    return matcher.accept_tokens(list(plan.tokens))


def jump_forward(matcher: GrammarMatcher, output_ids: Sequence[int],
                 encode: Callable[[str], list[int]],
                 decode: Callable[[Sequence[int]], str],
                 **plan_options: object) -> JumpForwardPlan | None:
    """Plan the jump from the matcher's position and apply it to the matcher.

    On success the caller replaces the last ``plan.rollback`` output tokens with
    ``plan.tokens`` (and prefills them); None leaves everything as it was.
    ``plan_options`` are passed to :func:`plan_jump_forward`.
    """
    forced = matcher.jump_forward_string()
    if not forced:
        return None
    plan = plan_jump_forward(output_ids, forced, encode, decode, **plan_options)  # type: ignore[arg-type]
    if plan is None or not apply_jump_forward(matcher, plan):
        return None
    return plan
