"""Matcher: accept/refuse, EOS as finish, bitmasks, rollback, copy, must_end."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from radixlm.fsm import GrammarMatcher, GrammarSpec


def _allowed(matcher: GrammarMatcher, vocab) -> set[int]:  # noqa: ANN001
    out = torch.zeros(vocab.num_words, dtype=torch.int32)
    matcher.fill_bitmask(out)
    bits = np.unpackbits(out.numpy().view(np.uint8), bitorder="little")
    return set(np.flatnonzero(bits[: vocab.vocab_size]).tolist())


def _ids(tokenizer, text: str) -> list[int]:  # noqa: ANN001
    return tokenizer.encode(text, add_special_tokens=False)


@pytest.fixture
def matcher(compiler) -> GrammarMatcher:  # noqa: ANN001
    return compiler.compile(GrammarSpec.regex(r"(yes|no)( [0-9]{1,3})?")).new_matcher()


def test_accepts_and_refuses(matcher, tokenizer, vocab) -> None:  # noqa: ANN001
    assert not matcher.accept_token(_ids(tokenizer, "maybe")[0])
    assert matcher.num_tokens == 0
    for t in _ids(tokenizer, "yes 12"):
        assert matcher.accept_token(t)
    assert matcher.can_end() and not matcher.is_finished()
    assert not matcher.accept_token(_ids(tokenizer, "x")[0])
    assert {1, 4} <= _allowed(matcher, vocab)


def test_eos_only_where_the_grammar_may_end(matcher, tokenizer, vocab) -> None:  # noqa: ANN001
    assert not matcher.accept_token(1)
    assert not {1, 4} & _allowed(matcher, vocab)
    for t in _ids(tokenizer, "no"):
        matcher.accept_token(t)
    assert matcher.accept_token(4)
    assert matcher.is_finished() and not matcher.can_end()
    assert _allowed(matcher, vocab) == {1, 4}
    assert not matcher.accept_token(1)
    matcher.rollback(1)
    assert not matcher.is_finished() and matcher.can_end()


def test_specials_are_never_allowed(matcher, vocab) -> None:  # noqa: ANN001
    assert not _allowed(matcher, vocab) & {0, 2, 3}
    for t in (0, 2, 3, 8191, 10_000, -1):
        assert not matcher.accept_token(t)


def test_rollback_and_copy(matcher, tokenizer) -> None:  # noqa: ANN001
    ids = _ids(tokenizer, "yes 7")
    assert matcher.accept_tokens(ids)
    clone = matcher.copy()
    matcher.rollback(len(ids))
    assert matcher.num_tokens == 0 and matcher.state == matcher.grammar.initial_state
    assert clone.num_tokens == len(ids) and clone.can_end()
    with pytest.raises(ValueError, match="rollback"):
        matcher.rollback(1)


def test_accept_tokens_is_all_or_nothing(matcher, tokenizer) -> None:  # noqa: ANN001
    good = _ids(tokenizer, "yes")
    assert not matcher.accept_tokens(good + _ids(tokenizer, "!"))
    assert matcher.num_tokens == 0


def test_must_end_when_only_eos_is_left(compiler, tokenizer) -> None:  # noqa: ANN001
    m = compiler.compile(GrammarSpec.choices(["done"])).new_matcher()
    assert m.accept_tokens(_ids(tokenizer, "done"))
    assert m.must_end()
    m2 = compiler.compile(GrammarSpec.regex("[0-9]+")).new_matcher()
    m2.accept_tokens(_ids(tokenizer, "12"))
    assert m2.can_end() and not m2.must_end()


def test_jump_forward_string(compiler, tokenizer) -> None:  # noqa: ANN001
    m = compiler.compile(GrammarSpec.regex('\\{"answer": (true|false)\\}')).new_matcher()
    assert m.jump_forward_string() == '{"answer": '
    m.accept_tokens(_ids(tokenizer, '{"answer": t'))
    assert m.jump_forward_string() == "rue}"
    m.accept_tokens(_ids(tokenizer, "rue}"))
    assert m.jump_forward_string() == ""  # final


def test_numpy_and_torch_rows_get_the_same_mask(compiler, tokenizer, vocab) -> None:  # noqa: ANN001
    """The numpy fast path writes what the torch path writes: on a fresh state (mask computed
    on the spot), a cached one, and after EOS."""
    grammar = compiler.compile(GrammarSpec.regex(r"[a-z]{2,40}!"))
    by_torch, by_numpy = grammar.new_matcher(), grammar.new_matcher()
    batch = torch.full((2, vocab.num_words), -7, dtype=torch.int32)
    rows = batch.numpy()
    for t in [*_ids(tokenizer, "hellothere!"), 1]:
        by_numpy.fill_bitmask(rows[1])  # the numpy row first: it may compute the mask
        by_torch.fill_bitmask(batch[0])
        assert torch.equal(batch[0], batch[1])
        assert by_torch.accept_token(t) and by_numpy.accept_token(t)
    assert by_numpy.is_finished()
    by_numpy.fill_bitmask(rows[1])
    by_torch.fill_bitmask(batch[0])
    assert torch.equal(batch[1], grammar.eos_mask) and torch.equal(batch[0], batch[1])
