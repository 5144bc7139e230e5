"""Closing within a token budget over JSONSchemaBench schemas (skipped where the corpus is
absent): wherever the budget is at least the grammar's bound, a random adversary's output
under the cut masks ends complete and ``jsonschema`` accepts it; budgets of a valid
instance's own token length, and 10% and 50% shorter (see ``benchmarks/budget_closing.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixlm.testing.closing_walk import budget_cases


def _run(corpus_dir: Path, compiler, tokenizer, vocab, per_subset: int | None) -> list:  # noqa: ANN001
    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def decode(ids: list[int]) -> str:
        return vocab.decode_bytes(ids).decode("utf-8", errors="replace")

    cases = []
    for subset in sorted(p for p in corpus_dir.iterdir() if p.is_dir()):
        for path in sorted(subset.glob("*.json"))[:per_subset]:
            cases += budget_cases(path, compiler, encode, decode)
    return cases


def _check(cases: list) -> None:
    tried = [c for c in cases if not c.refused]
    assert tried, "no schema of the sample ran"
    bad = [c for c in tried if not c.valid]
    assert not bad, bad[:5]


def test_closing_over_a_corpus_sample(corpus_dir, compiler, tokenizer, vocab) -> None:  # noqa: ANN001
    _check(_run(corpus_dir, compiler, tokenizer, vocab, 1))


@pytest.mark.slow
def test_closing_over_the_corpus(corpus_dir, compiler, tokenizer, vocab) -> None:  # noqa: ANN001
    _check(_run(corpus_dir, compiler, tokenizer, vocab, None))
