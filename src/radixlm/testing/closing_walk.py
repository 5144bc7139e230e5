"""Closing within a token budget, checked over JSON Schema corpus files (tests, benchmark).

:func:`closed_walk` is the adversary: a uniform random choice among the allowed tokens at each
step (an untrained model's worst case: it never heads for an end), the mask cut to the budget
as the scheduler cuts it (:meth:`GrammarMatcher.close_within`). :func:`budget_cases` runs it
over one corpus file: budgets of a valid instance's own token length (as the grammar spells
it), and 10% and 50% shorter; a budget below the grammar's bound is the request the server
refuses, and every other must end in a complete output that ``jsonschema`` accepts.
"""

from __future__ import annotations

import json
import math
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from radixlm.fsm import GrammarCompiler, GrammarError, GrammarSpec
from radixlm.fsm.grammars.json.witness import find_accepted_text

SHARES = (1.0, 0.9, 0.5)  # budgets: the instance's own token length, 10% and 50% shorter


@dataclass(frozen=True)
class BudgetCase:
    """One (schema, budget) run: ``need`` the grammar's bound at the start (None: no
    promise), ``refused`` the budget is below it, ``closed`` the output ended complete,
    ``valid`` ``jsonschema`` accepts it."""

    file: str
    share: float
    budget: int
    need: int | None
    refused: bool
    closed: bool
    valid: bool
    tokens: int


def closed_walk(grammar, budget: int, rng: random.Random,  # noqa: ANN001
                close: bool = True) -> tuple[list[int], bool]:
    """Random tokens (uniform among those allowed) under masks cut to ``budget`` (with
    ``close``; without it, as the engine does for a grammar whose bound is unknown, the masks
    are the grammar's alone and the output may be cut); the ids and whether the output is
    complete (the grammar may end there)."""
    matcher, out = grammar.new_matcher(), []
    vocab = grammar.vocab
    row = np.zeros(vocab.num_words, dtype=np.int32)
    eos = set(vocab.eos_token_ids)
    while len(out) < budget and not matcher.must_end():
        matcher.fill_bitmask(row)
        if close:
            matcher.close_within(row, budget - len(out))
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")[: vocab.vocab_size]
        allowed = np.flatnonzero(bits)
        if not allowed.size:
            return out, False  # a dead end: the property the closing mask rules out
        token = int(rng.choice(allowed.tolist()))
        if token in eos:
            return out, matcher.can_end()
        assert matcher.accept_token(token)
        out.append(token)
    return out, matcher.can_end()


def budget_cases(path: Path, compiler: GrammarCompiler, encode: Callable[[str], list[int]],
                 decode: Callable[[list[int]], str], seed: int = 0) -> list[BudgetCase]:
    """The budget runs of one corpus file (its first valid instance the grammar accepts);
    none when the schema is refused or no instance is accepted."""
    import jsonschema

    doc = json.loads(path.read_text())
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            grammar = compiler.compile(GrammarSpec.json_schema(json.dumps(doc["schema"])))
    except GrammarError:
        return []
    judge_cls = jsonschema.validators.validator_for(
        doc["schema"] if isinstance(doc["schema"], dict) else {},
        default=jsonschema.Draft202012Validator)
    judge = judge_cls(doc["schema"])
    text = next((t for t in (_accepted(grammar, test["data"]) for test in doc["tests"]
                             if test["valid"]) if t is not None), None)
    if text is None:
        return []
    length = len(encode(text))
    need = grammar.new_matcher().tokens_to_close()
    cases = []
    for share in SHARES:
        budget = max(1, math.ceil(share * length))
        refused = need is not None and budget < need
        closed = valid = False
        tokens = 0
        if not refused:
            try:
                # need None: the engine does not close (budget_closing.close_within_budget)
                ids, closed = closed_walk(grammar, budget, random.Random(seed),
                                          close=need is not None)
            except GrammarError:  # a budget of the automaton while decoding: refused by name
                continue
            tokens = len(ids)
            valid = closed and _valid(judge, decode(ids))
        cases.append(BudgetCase(f"{path.parent.name}/{path.name}", share, budget, need,
                                refused, closed, valid, tokens))
    return cases


def _accepted(grammar, data: object) -> str | None:  # noqa: ANN001
    found = find_accepted_text(grammar.dfa, data)
    return found.text


def _valid(judge, text: str) -> bool:  # noqa: ANN001
    try:
        return judge.is_valid(json.loads(text))
    except ValueError:
        return False
