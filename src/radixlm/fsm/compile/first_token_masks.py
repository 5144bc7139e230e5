"""The masks a stream needs first, computed by the compile: a grammar whose second state
cannot be masked is refused up front instead of failing its streams at their second token.

A stream asks for the start state's mask, then for the mask of the state its first token
(or the start's forced jump-forward text) leads to. Computed on first visit, that second mask
was where a stream paused: on the corpus's Handwritten allOfPProp4-10 and allany16 it can
never be computed (the liveness of the key's intersections explores a whole free-form JSON
value: 2.5 M steps, 1-3 s, then a budget error), so every request on them streamed one token,
paused 1-3 s and failed. Computed here, within the compile's step budget (the masks charge it
as the start state's does, :meth:`CompiledGrammar._mask_in_compile`), such a grammar is
refused by the compile instead; on the rest of the corpus these masks cost about 1 ms a
schema (most states one token after the start share a mask).

The masks are computed in a fixed order and never stopped early by other work (a compile
asked for elsewhere only parks them), so the verdict is the same on any machine and under
any load.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..automaton.lazy_dfa import DEAD

if TYPE_CHECKING:
    from .warm_up import GrammarWarmUp


def mask_first_tokens(grammar: GrammarWarmUp) -> dict[int, bytes]:
    """Compute the masks of the start state and of every state one token after it, and of
    the state after the start's forced text (jump-forward); returns each such state's byte
    path from the start (for the disk cache). ``grammar``: a compiled grammar (its warm-up
    base names what is read here).

    Raises :class:`..errors.GrammarError` where the compile would have to refuse (a budget
    hit, a state no token can continue), as a mask computed by decoding would later."""
    start = grammar.dfa.initial
    grammar.mask(start)
    paths: dict[int, bytes] = {}
    states, tokens = grammar.index.successors(start)
    for state, token in zip(states.tolist(), tokens.tolist(), strict=True):
        if state != DEAD:
            paths[state] = grammar.vocab.token_bytes[token] or b""
    forced, after = grammar.compressed.run(start)
    if forced and after != DEAD:
        paths.setdefault(after, forced)
    for state in paths:
        grammar.mask(state)
    return paths
