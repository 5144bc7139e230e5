"""The greedy mask shortcut (``runtime/scheduling/greedy_mask_shortcut.py``): a greedy verify
row whose unmasked pick the constraint allows skips its mask, and the draws are the masked
path's.

The selection rule on random logits (ties, ``-inf``), masks, penalties and bans; ``allows``
against the mask it stands for, on every token at the states of a walk; and the scheduler's
constrained outputs with the shortcut on and off, on rows where the pick was allowed and
rows where it was refused."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from stepping import PROMPT, SCHEMA, constrained, run

from radixlm.fsm import CompileBudget, GrammarCompiler, GrammarSpec
from radixlm.kernels.cpu.token_bitmask import apply_token_bitmask_cpu
from radixlm.runtime.model.sampler import SampleRow, sample
from radixlm.runtime.scheduling.greedy_mask_shortcut import allows
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.wire.messages import GenerateReq, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams

# few distinct values: ties everywhere; -inf as a masked or impossible logit
VALUES = [float("-inf"), -3.0, -1.0, 0.0, 0.5, 2.0]


@st.composite
def greedy_rows(draw: st.DrawFn) -> tuple[torch.Tensor, np.ndarray, SampleRow]:
    """(logits [1, V], allowed bool [V], a greedy sampler row with penalties and bans)."""
    v = draw(st.integers(1, 80))
    logits = torch.tensor([draw(st.lists(st.sampled_from(VALUES), min_size=v, max_size=v))],
                          dtype=torch.float32)
    allowed = np.array(draw(st.lists(st.booleans(), min_size=v, max_size=v)))
    params = SamplingParams(temperature=0.0,
                            repetition_penalty=draw(st.sampled_from([1.0, 1.3])),
                            frequency_penalty=draw(st.sampled_from([0.0, 0.7])),
                            presence_penalty=draw(st.sampled_from([0.0, 0.4])))
    ids = st.lists(st.integers(0, v - 1), max_size=4)
    prompt = st.lists(st.integers(0, v - 1), min_size=1, max_size=4)  # a prompt: a token
    row = SampleRow(params=params, output_ids=draw(ids), prompt_ids=draw(prompt),
                    banned_ids=sorted(set(draw(ids))))
    return logits, allowed, row


def bitmask(allowed: np.ndarray) -> torch.Tensor:
    """int32 [1, ceil(V / 32)] with bit t set where ``allowed[t]``."""
    bits = np.zeros((allowed.size + 31) // 32 * 32, dtype=np.uint8)
    bits[: allowed.size] = allowed
    return torch.from_numpy(np.packbits(bits, bitorder="little").view(np.int32).copy())[None]


@settings(max_examples=400, deadline=None)
@given(greedy_rows())
def test_an_allowed_unmasked_pick_is_the_masked_pick(case):
    logits, allowed, row = case
    gen = torch.Generator().manual_seed(0)
    pick = sample(logits.clone(), [row], gen).next_ids[0]
    masked = logits.clone()
    apply_token_bitmask_cpu(masked, bitmask(allowed))
    if allowed[pick]:
        assert sample(masked, [row], gen).next_ids[0] == pick


def test_allows_is_the_mask_and_leaves_the_matcher(vocab, tokenizer):
    compiler = GrammarCompiler(vocab, CompileBudget(background_warmup_states=0))
    matcher = compiler.compile(GrammarSpec.json_schema(json.dumps(SCHEMA))).new_matcher()
    text = '{"name": "Ana", "age": 41, "city": "Rome"}'
    for token in tokenizer.encode(text, add_special_tokens=False) + [None]:
        words = np.zeros(vocab.num_words, dtype=np.int32)
        matcher.fill_bitmask(words)
        mask = np.unpackbits(words.view(np.uint8), bitorder="little")[: vocab.vocab_size]
        before = matcher.num_tokens
        assert [allows(matcher, t) for t in range(vocab.vocab_size)] == mask.astype(bool).tolist()
        assert matcher.num_tokens == before
        if token is not None:
            assert matcher.accept_token(token)


def string_request(rid: str, temperature: float = 0.0) -> GenerateReq:
    """A constrained request whose mask allows most tokens (inside a long string) and
    refuses many (the keys, the closing), so unmasked picks are allowed and refused."""
    schema = {"type": "object", "properties": {"note": {"type": "string", "maxLength": 60}},
              "required": ["note"], "additionalProperties": False}
    return GenerateReq(rid=rid, input_ids=PROMPT, grammar=GrammarReq(
        json_schema=json.dumps(schema)), sampling=SamplingParams(
        temperature=temperature, max_new_tokens=50))


def copy_oracle(s: Scheduler, reference: dict[str, list[int]]) -> None:
    """Every chain is the reference continuation (every third one with its second token
    changed), cut to the request's budget and constraint."""
    from radixlm.runtime.speculative.draft_chain import SOURCE_PROMPT_LOOKUP, DraftChain
    from radixlm.runtime.speculative.grammar_drafts import grammar_prefix

    spec = s.speculator
    calls = [0]

    def propose(req):  # noqa: ANN001, ANN202
        calls[0] += 1
        ref = reference[req.rid]
        tokens = list(ref[req.num_output : req.num_output + max(spec._budget(req), 0)])
        if calls[0] % 3 == 0 and len(tokens) > 1:
            tokens[1] = (tokens[1] + 1) % 1000
        chain = DraftChain()
        chain.extend(tokens, SOURCE_PROMPT_LOOKUP)
        chain.cut(grammar_prefix(req.grammar, chain.tokens))
        return chain

    spec.propose = propose


def tight(rid: str) -> GenerateReq:
    """The stepping schema's request with a budget its output must be closed within: the
    closing cut narrows the masks of its last rows."""
    req = constrained(rid)
    return GenerateReq(rid=rid, input_ids=req.input_ids, grammar=req.grammar,
                       sampling=SamplingParams(temperature=0.0, max_new_tokens=24))


@pytest.mark.parametrize("make", ["json", "string", "tight"])
def test_shortcut_on_and_off_give_the_same_tokens(make_scheduler, make):
    request = {"json": constrained, "string": string_request, "tight": tight}[make]
    plain = make_scheduler(disable_jump_forward=True, grammar_mask_wait_ms=60_000)
    expected, reasons = outputs(plain, [request("a"), request("b")], reasons=True)
    got, counts = {}, {}
    for shortcut in (True, False):
        s = make_scheduler(grammar_mask_wait_ms=60_000, speculative_algorithm="NGRAM")
        s.output.verifier.greedy_shortcut = shortcut
        copy_oracle(s, expected)
        got[shortcut] = outputs(s, [request("a"), request("b")], reasons=True)
        v = s.output.verifier
        counts[shortcut] = (v.skipped_masks, v.masked_picks, s.info()["spec_accepted_tokens"])
    assert got[True] == got[False] == (expected, reasons)
    skipped, masked, accepted = counts[True]
    assert accepted > 0 and skipped > 0 and masked > 0, counts
    assert counts[False][:2] == (0, 0)


def test_sampled_requests_keep_every_mask(make_scheduler):
    reference = outputs(make_scheduler(grammar_mask_wait_ms=60_000), [string_request("t")])
    s = make_scheduler(grammar_mask_wait_ms=60_000, speculative_algorithm="NGRAM")
    copy_oracle(s, reference)
    outputs(s, [string_request("t", temperature=0.8)])
    assert s.info()["spec_verify_steps"] > 0
    assert s.output.verifier.skipped_masks == s.output.verifier.masked_picks == 0


def outputs(s: Scheduler, reqs: list[GenerateReq], reasons: bool = False):  # noqa: ANN201
    """The requests' outputs on ``s`` (with their finish reasons as text: ``reasons``)."""
    for r in reqs:
        s.add_request(r)
    ids, why = run(s)
    return (ids, {k: repr(v) for k, v in why.items()}) if reasons else ids
