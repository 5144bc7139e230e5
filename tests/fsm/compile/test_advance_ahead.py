"""Advances decided ahead: a token's advance checked for automaton rows it would build
(``advance_ready``, no lock, nothing built) and prepared by the compiler's worker
(``prefetch_advance``), so that the scheduler's thread never builds one."""

from __future__ import annotations

import pytest

from radixlm.fsm import (
    CompileBudget,
    GrammarBudgetError,
    GrammarCompiler,
    GrammarSpec,
    jump_forward,
)
from radixlm.fsm.automaton.lazy_dfa import DEAD

# No compile-time or background warm-up: every row is built by what a test asks for.
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)
SCHEMA = {"type": "object", "properties": {"alpha": {"type": "string", "maxLength": 12},
                                           "beta": {"type": "integer"},
                                           "gamma": {"enum": ["north", "south"]}},
          "required": ["alpha", "beta", "gamma"], "additionalProperties": False}
CASES = [
    (GrammarSpec.json_schema(SCHEMA), '{"alpha":"xyz tu","beta":-1204,"gamma":"south"}'),
    (GrammarSpec.regex(r"[a-z]{1,12}@[a-z]{2,8}\.(com|org)"), "maple@mailbox.org"),
    (GrammarSpec.regex(r"[0-9]{1,6}(\.[0-9]{1,3})?"), "31415.92"),  # accepting all along
]


def _growth(grammar) -> tuple[int, int, int, int]:  # noqa: ANN001
    """What building rows, terms or masks would change."""
    dfa = grammar.dfa
    return (dfa.num_states, int(dfa.built.sum()), dfa.builder.num_terms,
            grammar.index.num_masks)


def test_walk_built_follows_built_rows_only_and_builds_nothing(vocab) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(CASES[1][0])
    dfa = grammar.dfa
    before = _growth(grammar)
    assert dfa.walk_built(dfa.initial, b"map") is None  # the start state's row is not built
    assert dfa.walk_built(dfa.initial, b"") == dfa.initial
    assert _growth(grammar) == before
    target = dfa.walk(dfa.initial, b"map")  # builds the rows on the way
    assert target != DEAD
    assert dfa.walk_built(dfa.initial, b"map") == target
    assert dfa.walk_built(dfa.initial, b"ma!") == DEAD  # refused where the rows say so
    assert dfa.walk_built(dfa.initial, b"mapl") is None  # target's own row is not built yet


@pytest.mark.parametrize("jump", [True, False], ids=["jump", "no jump"])
@pytest.mark.parametrize(("spec", "text"), CASES, ids=["json", "email", "number"])
def test_a_ready_advance_builds_nothing_on_the_callers_thread(vocab, tokenizer, spec, text,  # noqa: ANN001
                                                              jump) -> None:
    """Along a valid text, token by token: an advance not ready is prepared by the worker;
    once ready, accepting the token, the end check and (``jump``) the forced run build no
    row, term or mask; and the matcher ends where the text is complete."""
    compiler = GrammarCompiler(vocab, COLD)
    grammar = compiler.compile(spec)
    matcher = grammar.new_matcher()
    deferred = 0
    out: list[int] = []

    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    for token in tokenizer.encode(text, add_special_tokens=False):
        if not matcher.advance_ready(token, jump):
            deferred += 1
            compiler.prefetch_advance(matcher, token)
            assert matcher.wait_advance_ready(token, jump, 600.0)  # woken by the worker
        assert matcher.advance_error(token) is None
        before = _growth(grammar)
        assert matcher.accept_token(token)
        out.append(token)
        matcher.must_end()
        if jump:  # planned and applied on a copy, as the scheduler does on its matcher
            jump_forward(matcher.copy(), out, encode, tokenizer.decode)
        assert _growth(grammar) == before, "the advance built rows on the caller's thread"
    compiler.shutdown()
    assert deferred > 0, "a cold grammar's advances need rows: the worker built them"
    assert matcher.can_end()


def test_a_refused_token_or_eos_is_ready_at_once(vocab, tokenizer) -> None:  # noqa: ANN001
    grammar = GrammarCompiler(vocab, COLD).compile(CASES[1][0])
    matcher = grammar.new_matcher()
    before = _growth(grammar)
    assert matcher.advance_ready(vocab.eos_token_ids[0])  # refused or accepted, no rows
    assert matcher.advance_ready(vocab.vocab_size + 5)  # out of range: refused at once
    assert _growth(grammar) == before
    assert not matcher.accept_token(vocab.vocab_size + 5)


def test_an_advance_the_worker_cannot_prepare_reports_its_budget(vocab, tokenizer) -> None:  # noqa: ANN001
    """A budget hit while preparing an advance is kept: the advance is ready at once (the
    caller is not left waiting) and says why it failed."""
    compiler = GrammarCompiler(vocab, CompileBudget(warmup_states=0, background_warmup_states=0,
                                                    max_states=8))
    grammar = compiler.compile(GrammarSpec.regex(r"[a-z]{0,60}!"))
    matcher = grammar.new_matcher()
    error = None
    for token in tokenizer.encode("abcdefghijklmnopqrstuvwxyz", add_special_tokens=False):
        compiler.prefetch_advance(matcher, token)
        assert matcher.wait_advance_ready(token, True, 600.0)
        error = matcher.advance_error(token)
        if error is not None:
            break
        assert matcher.accept_token(token)
    compiler.shutdown()
    assert isinstance(error, GrammarBudgetError) and "states" in str(error)
