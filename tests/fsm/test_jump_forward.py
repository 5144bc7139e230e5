"""Jump-forward plans: exact, monotone text; held-back tails; the same text whatever the path."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.fsm import (
    GrammarSpec,
    WhitespacePolicy,
    apply_jump_forward,
    jump_forward,
    plan_jump_forward,
)


def _codec(tokenizer):  # noqa: ANN001, ANN202
    def encode(text: str) -> list[int]:
        return tokenizer.encode(text, add_special_tokens=False)

    def decode(ids) -> str:  # noqa: ANN001
        return tokenizer.decode(list(ids))

    return encode, decode


@settings(max_examples=150, deadline=None)
@given(prefix=st.text(st.sampled_from('ab {}":,01é'), max_size=12),
       jump=st.text(st.sampled_from('ab {}":,01é'), min_size=1, max_size=12),
       holdback=st.integers(0, 3))
def test_plan_invariants(tokenizer, vocab, prefix: str, jump: str, holdback: int) -> None:  # noqa: ANN001
    encode, decode = _codec(tokenizer)
    output = encode(prefix)
    plan = plan_jump_forward(output, jump, encode, decode, holdback_tokens=holdback,
                             extendable=lambda t: bool(vocab.extendable[t]))
    if plan is None:
        return
    kept = output[: len(output) - plan.rollback]
    new_text = decode(kept + list(plan.tokens))
    assert plan.tokens and plan.jump_text and jump.startswith(plan.jump_text)
    assert new_text == decode(output) + plan.jump_text  # exact and monotone
    assert plan.rollback <= 4


def test_no_plan_for_empty_jump(tokenizer) -> None:  # noqa: ANN001
    encode, decode = _codec(tokenizer)
    assert plan_jump_forward(encode("ab"), "", encode, decode) is None


def test_refused_plans_leave_the_matcher_alone(compiler, tokenizer) -> None:  # noqa: ANN001
    encode, decode = _codec(tokenizer)
    matcher = compiler.compile(GrammarSpec.regex('\\{"key": [0-9]\\}')).new_matcher()
    bad = plan_jump_forward([], '{"kex": ', encode, decode, holdback_tokens=0)
    assert bad is not None and not apply_jump_forward(matcher, bad)
    assert matcher.num_tokens == 0
    good = jump_forward(matcher, [], encode, decode, holdback_tokens=0)
    assert good is not None and decode(list(good.tokens)) == '{"key": '
    assert matcher.num_tokens == len(good.tokens)


def test_holdback_keeps_the_tail_for_the_model(tokenizer) -> None:  # noqa: ANN001
    encode, decode = _codec(tokenizer)
    plan = plan_jump_forward([], '{"name": "', encode, decode, holdback_tokens=2)
    full = encode('{"name": "')
    assert plan is not None and list(plan.tokens) == full[: len(full) - 2]
    assert plan_jump_forward([], "{", encode, decode, holdback_tokens=2) is None


SCHEMA = {"type": "object", "properties": {
    "first_name": {"type": "string", "maxLength": 8},
    "family_name": {"type": "string", "maxLength": 8},
    "year_of_birth": {"type": "integer", "minimum": 1900, "maximum": 2100},
    "country_code": {"enum": ["NO", "SE", "DK"]}},
    "required": ["first_name", "family_name", "year_of_birth", "country_code"],
    "additionalProperties": False}
TARGET = '{"first_name": "Ann", "family_name": "Lee", "year_of_birth": 1987, ' \
         '"country_code": "SE"}'


def _drive(grammar, tokenizer, vocab, target: str, seed: int, jump: bool) -> tuple[str, int]:  # noqa: ANN001
    """A 'model' that wants ``target`` and picks a random tokenization of it, step by step;
    with ``jump``, forced text is appended through jump-forward plans."""
    encode, decode = _codec(tokenizer)
    rng = random.Random(seed)
    matcher, out, forced = grammar.new_matcher(), [], 0
    goal = target.encode()
    while decode(out) != target:
        plan = jump_forward(matcher, out, encode, decode,
                            extendable=lambda t: bool(vocab.extendable[t])) if jump else None
        if plan is not None:
            before = decode(out)
            out = out[: len(out) - plan.rollback] + list(plan.tokens)
            assert decode(out).startswith(before)
            forced += len(plan.tokens)
            continue
        done = decode(out).encode()
        rest = goal[len(done):]
        options = [t for t in range(5, len(tokenizer)) if vocab.token_bytes[t]
                   and rest.startswith(vocab.token_bytes[t])]
        token = rng.choice(options)
        assert matcher.accept_token(token)
        out.append(token)
    assert matcher.accept_token(1)
    return decode(out), forced


@pytest.mark.parametrize("seed", range(4))
def test_same_text_whichever_path(compiler, tokenizer, vocab, seed: int) -> None:  # noqa: ANN001
    grammar = compiler.compile(GrammarSpec.json_schema(SCHEMA))
    plain, _ = _drive(grammar, tokenizer, vocab, TARGET, seed, jump=False)
    jumped, forced = _drive(grammar, tokenizer, vocab, TARGET, seed, jump=True)
    assert plain == jumped == TARGET
    assert forced > 0


def test_long_keys_cut_model_steps(compiler, tokenizer, vocab) -> None:  # noqa: ANN001
    """Jump-forward saves at least 30% of the model's steps on long-key schemas."""
    grammar = compiler.compile(GrammarSpec.json_schema(
        SCHEMA, whitespace=WhitespacePolicy("compact")))
    target = TARGET.replace(": ", ":").replace(", ", ",")
    encode, _ = _codec(tokenizer)
    steps_plain = len(encode(target))
    _, forced = _drive(grammar, tokenizer, vocab, target, 0, jump=True)
    assert forced / steps_plain >= 0.3
