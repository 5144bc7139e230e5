"""Drafts from a constraint: the text its grammar forces next, as tokens; and the cut of any
draft chain at the first token the grammar refuses.

Where today's jump-forward would append forced text without the model, a speculating request
proposes that text's tokens as drafts instead: the model checks them and, in the same forward,
also gives the first free token after them (and keeps its own tokenization where it differs).
Every check runs on a copy of the request's matcher, so the request's grammar state is never
changed here, and a refused token only ends the chain: nothing here ever treats a state as
"all tokens allowed".
"""

from __future__ import annotations

from collections.abc import Callable

from ...fsm import GrammarError, GrammarMatcher


def forced_tokens(matcher: GrammarMatcher, encode: Callable[[str], list[int]],
                  want: int) -> list[int]:
    """Up to ``want`` tokens of the text the grammar forces from ``matcher``'s state (its
    jump-forward string, tokenized on its own), [] when nothing is forced."""
    return forced_text_tokens(matcher.jump_forward_string() if want > 0 else "", encode, want)


def forced_text_tokens(text: str, encode: Callable[[str], list[int]], want: int) -> list[int]:
    """Up to ``want`` tokens of ``text`` (a forced string), tokenized on its own."""
    if want <= 0 or not text:
        return []
    return list(encode(text)[:want])


def grammar_prefix(matcher: GrammarMatcher, drafts: list[int]) -> int:
    """How many leading ``drafts`` the grammar accepts from ``matcher``'s state, stopping
    after a token that leaves only the end possible (the output ends there: nothing after it
    can be kept). ``matcher`` itself is not changed."""
    trial = matcher.copy()
    for i, token in enumerate(drafts):
        try:
            accepted = trial.accept_token(token)
        except GrammarError:  # the lazy automaton hit a budget: keep what was checked
            return i
        if not accepted:
            return i
        if trial.is_finished() or trial.must_end():
            return i + 1
    return len(drafts)
