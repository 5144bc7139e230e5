"""The compile computes the masks a stream needs first (the start's one-token successors and
the state after its forced text): they are cached when the compile returns, identical to
masks computed on first visit, and a grammar whose second state cannot be masked is refused
by the compile instead of failing its stream at the second token."""

from __future__ import annotations

import numpy as np
import pytest

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarError, GrammarSpec, TokenVocabulary
from radixlm.fsm.automaton.lazy_dfa import DEAD

# the compile's breadth-first warm-up kept to the start state: only first_token_masks differs
FIRST = CompileBudget(background_warmup_states=0, warmup_states=1)
LAZY = CompileBudget(background_warmup_states=0, warmup_states=1, first_token_masks=False)
SPECS = [
    GrammarSpec.json_schema({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 12}, "n": {"type": "integer", "minimum": 3}},
        "required": ["name", "n"]}),
    GrammarSpec.json_schema({"type": "array", "items": {"enum": ["alpha", "beta"]},
                             "maxItems": 3}),
    GrammarSpec.regex(r"abc(d|ef)[0-9]{2,5}"),
]
EOS = 0
# no token spells "\x01": the state after "a" in "a\x01" can never be continued
TOKENS = [b"</s>", b"a", b"b", b"ab", b"c"]


def _first_states(grammar) -> dict[int, bytes]:  # noqa: ANN001
    """The states one token after the start, and after the start's forced text."""
    states, tokens = grammar.index.successors(grammar.initial_state)
    out = {s: grammar.vocab.token_bytes[t] for s, t in zip(states.tolist(), tokens.tolist())
           if s != DEAD}
    forced, after = grammar.compressed.run(grammar.initial_state)
    if forced and after != DEAD:
        out.setdefault(after, forced)
    return out


@pytest.mark.parametrize("spec", SPECS, ids=["object", "array", "regex"])
def test_first_masks_are_cached_and_identical_to_lazy_ones(vocab, spec) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, FIRST).compile(spec)
    reference = GrammarCompiler(vocab, LAZY).compile(spec)
    first = _first_states(grammar)
    assert first
    for state, path in first.items():
        assert grammar.index.cached_mask(state) is not None, path
        ref_state = reference.dfa.walk(reference.initial_state, path)
        assert np.array_equal(grammar.index.cached_mask(state).numpy(),
                              reference.mask(ref_state).numpy())


def test_lazy_compile_leaves_the_first_masks_to_decoding(vocab) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, LAZY).compile(SPECS[2])
    assert grammar.index.num_masks == 1  # the start state's only


def test_a_second_state_no_token_continues_refuses_the_compile() -> None:
    vocab = TokenVocabulary(TOKENS, len(TOKENS), [EOS])
    spec = GrammarSpec.regex("(a\x01|bc)")
    with pytest.raises(GrammarError):
        GrammarCompiler(vocab, FIRST).compile(spec)
    # without the first masks it compiled, and failed at the second token
    grammar = GrammarCompiler(vocab, LAZY).compile(spec)
    matcher = grammar.new_matcher()
    assert matcher.accept_token(TOKENS.index(b"a"))
    with pytest.raises(GrammarError):
        grammar.mask(matcher.state)
