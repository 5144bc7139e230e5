"""Speculative decoding (``--speculative-algorithm NGRAM``) is exact: the scheduler's greedy
output is token for token the one without speculation, whatever the drafts, through every
finish condition; sampled tokens keep their distribution; rejected drafts' KV goes back.

Drafts come from the real sources (prompt lookup on copy-heavy prompts, the constraint's
forced text) and from an oracle that proposes the reference continuation with planted errors,
so that long chains are accepted, cut at a mismatch, and cross every finish point.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable

import jsonschema
import pytest
from stepping import SCHEMA, constrained, not_ready_at_first, run

from radixlm.runtime.model.model_runner import ModelRunner, RunnerConfig
from radixlm.runtime.scheduling.request import Req
from radixlm.runtime.scheduling.scheduler import Scheduler
from radixlm.runtime.server_args import ServerArgs
from radixlm.runtime.speculative.draft_chain import SOURCE_PROMPT_LOOKUP, DraftChain
from radixlm.runtime.speculative.grammar_drafts import grammar_prefix
from radixlm.runtime.speculative.ngram_lookup import NgramLookup
from radixlm.runtime.wire.messages import FinishLength, FinishStop, GenerateReq, GrammarReq
from radixlm.runtime.wire.sampling_params import SamplingParams

SPEC = {"speculative_algorithm": "NGRAM"}
PASSAGE = list(range(100, 160))
COPY_PROMPT = PASSAGE + [7, 8] + PASSAGE[:12]  # the passage, then its start again
LONG_KEYS = {"type": "object", "required": ["customer_full_name", "preferred_contact_city"],
             "properties": {"customer_full_name": {"type": "string", "maxLength": 6},
                            "preferred_contact_city": {"enum": ["Paris", "Rome"]}},
             "additionalProperties": False}  # keys a jump-forward forces
def greedy(rid: str, prompt: list[int], new: int = 40, **params) -> GenerateReq:  # noqa: ANN003
    params.setdefault("ignore_eos", True)
    return GenerateReq(rid=rid, input_ids=prompt, sampling=SamplingParams(
        temperature=0.0, max_new_tokens=new, **params))


def outputs(s: Scheduler, reqs: list[GenerateReq]) -> tuple[dict, dict]:
    for r in reqs:
        s.add_request(r)
    ids, reasons = run(s)
    assert s.kv.audit() == [], "the KV ownership invariant holds after speculation"
    assert all(kv.kv_len <= kv.computed_len for kv in s.kv.live.values())
    return ids, reasons


def oracle(s: Scheduler, reference: dict[str, list[int]], wrong_every: int = 3
           ) -> Callable[[Req], DraftChain]:
    """Replace ``s``'s draft source: each request is proposed the reference continuation,
    with every ``wrong_every``-th chain's third token changed (a rejection mid-chain), cut to
    its budget and to its constraint like the real sources' chains."""
    real = s.speculator
    calls = Counter()

    def propose(req: Req) -> DraftChain:
        calls[req.rid] += 1
        want = real._budget(req)
        ref = reference[req.rid]
        tokens = list(ref[req.num_output : req.num_output + max(want, 0)])
        if calls[req.rid] % wrong_every == 0 and len(tokens) > 2:
            tokens[2] = (tokens[2] + 1) % 1000
        chain = DraftChain()
        chain.extend(tokens, SOURCE_PROMPT_LOOKUP)
        if req.grammar is not None:
            chain.cut(grammar_prefix(req.grammar, chain.tokens))
        return chain

    real.propose = propose
    return propose


def test_copy_heavy_prompt_is_exact_and_drafts_from_the_prompt(make_scheduler):
    reqs = [greedy("copy", COPY_PROMPT, new=60)]
    expected, _ = outputs(make_scheduler(), reqs)
    s = make_scheduler(**SPEC)
    got, reasons = outputs(s, reqs)
    assert got == expected
    assert isinstance(reasons["copy"], FinishLength)
    info = s.info()
    assert info["spec_verify_steps"] > 0 and info["spec_accepted_tokens_prompt_lookup"] > 0
    assert info["spec_accept_length_mean"] > 1
    assert info["generated_tokens"] == 60


@pytest.mark.parametrize("page_size", [1, 4])
def test_oracle_drafts_with_planted_errors_are_exact(make_scheduler, page_size):
    reqs = [greedy("a", COPY_PROMPT, new=50), greedy("b", list(range(300, 340)), new=37),
            greedy("c", list(range(500, 520)), new=45)]
    expected, _ = outputs(make_scheduler(page_size=page_size), reqs)
    s = make_scheduler(page_size=page_size, **SPEC)
    oracle(s, expected)
    got, _ = outputs(s, reqs)
    assert got == expected
    info = s.info()
    # rejections happened (planted) and so did whole chains (accept length near k + 1)
    assert 0 < info["spec_accept_rate"] < 1
    assert info["spec_accept_length_mean"] > 3


def test_rejected_lookup_drafts_pause_drafting_and_stay_exact(make_scheduler, monkeypatch):
    """Prompt lookup that is always wrong (a long match, a wrong continuation): the request's
    draft budget stops drafting after a few rejections and only probes now and then, so
    nearly every step is a plain one; the tokens are plain greedy decoding's."""
    prompt = list(range(300, 340))
    expected, _ = outputs(make_scheduler(), [greedy("w", prompt, new=60)])
    ref = expected["w"]

    def wrong(self, ids, want, tail=()):  # noqa: ANN001, ANN202
        pos = len(ids) - len(prompt)
        return [(ref[pos] + 1) % 1000] * want if pos < len(ref) else [], 4

    monkeypatch.setattr(NgramLookup, "match", wrong)
    s = make_scheduler(**SPEC)
    got, _ = outputs(s, [greedy("w", prompt, new=60)])
    assert got == expected
    info = s.info()
    assert info["spec_accepted_tokens_prompt_lookup"] == 0
    assert 0 < info["spec_verify_steps"] <= 12, "a few verifies, then pauses and probes"


def test_finished_outputs_draft_for_later_requests(make_scheduler):
    prompt = list(range(600, 630))  # nothing repeats in it
    expected, _ = outputs(make_scheduler(), [greedy("first", prompt, new=30)])
    s = make_scheduler(**SPEC)
    assert outputs(s, [greedy("first", prompt, new=30)])[0] == expected
    got, _ = outputs(s, [greedy("again", prompt, new=30)])
    assert got["again"] == expected["first"]
    assert s.info()["spec_accepted_tokens_cross_request"] > 0


def json_reference(make_scheduler) -> dict[str, list[int]]:  # noqa: ANN001
    """The constrained request's plain greedy output under its mask (no jump-forward)."""
    return outputs(make_scheduler(disable_jump_forward=True, grammar_mask_wait_ms=60_000),
                   [constrained()])[0]


def test_json_schema_is_exact_against_plain_decoding_without_jump_forward(make_scheduler):
    """A speculating request proposes its grammar's forced text instead of jump-forward, so
    its output is plain greedy decoding's under the mask (jump-forward's retokenization off)."""
    expected = json_reference(make_scheduler)
    s = make_scheduler(grammar_mask_wait_ms=60_000, **SPEC)
    got, reasons = outputs(s, [constrained()])
    assert got == expected
    assert isinstance(reasons["json"], FinishStop)
    jsonschema.validate(json.loads(s.tokenizer.decode(got["json"])), SCHEMA)
    info = s.info()
    assert info["spec_accepted_tokens_grammar"] > 0, "forced keys are accepted as drafts"
    assert info["forced_tokens"] == 0, "no jump-forward while speculating"


def test_text_lookup_drafts_a_constrained_request_and_stays_exact(make_scheduler):
    """A second identical constrained request finds the first one's text (shared text
    lookup): its drafts are the forced text and that text, tokenized together; the tokens
    are still plain greedy decoding's."""
    expected = json_reference(make_scheduler)
    s = make_scheduler(grammar_mask_wait_ms=60_000, **SPEC)
    assert outputs(s, [constrained()])[0] == expected
    before = s.info()["spec_accepted_tokens_text_lookup"]
    assert outputs(s, [constrained("again")])[0]["again"] == expected["json"]
    assert s.info()["spec_accepted_tokens_text_lookup"] > before


def test_json_schema_with_oracle_drafts_is_exact(make_scheduler):
    expected = json_reference(make_scheduler)
    s = make_scheduler(grammar_mask_wait_ms=60_000, **SPEC)
    oracle(s, expected, wrong_every=2)
    assert outputs(s, [constrained()])[0] == expected


@pytest.mark.parametrize("check", ["advance_ready", "mask_ready"])
def test_deferred_advances_and_held_masks_inside_chains(make_scheduler, check):
    """A kept token whose grammar advance is deferred to the compiler's worker ends its chain
    there (the request is held until the advance is made); a mask not ready holds the request
    out of the step, drafts and all. Either way the tokens are plain decoding's."""
    expected = json_reference(make_scheduler)
    s = make_scheduler(grammar_mask_wait_ms=0, **SPEC)
    not_ready_at_first(s, check, 2)
    oracle(s, expected)
    assert outputs(s, [constrained()])[0] == expected
    info = s.info()
    assert info["spec_accepted_tokens"] > 0
    held = "grammar_advances_deferred" if check == "advance_ready" else "mask_held_steps"
    assert info[held] > 0


@pytest.mark.parametrize("cut", [3, 9, 14])
def test_finish_inside_a_chain_matches_plain_decoding(make_scheduler, cut):
    """A stop token, a stop string, max_new_tokens and the context each end the output at the
    same token when the chain runs past it."""
    base = greedy("ref", COPY_PROMPT, new=30)
    ref, _ = outputs(make_scheduler(), [base])
    ref_ids = ref["ref"]
    tok = make_scheduler().tokenizer
    stop_text = tok.decode(ref_ids[cut - 1 : cut])
    cases = [
        greedy("stop_id", COPY_PROMPT, new=30, stop_token_ids=[ref_ids[cut]]),
        greedy("stop_str", COPY_PROMPT, new=30, stop=[stop_text]) if stop_text.strip()
        else greedy("stop_str", COPY_PROMPT, new=30),
        greedy("max", COPY_PROMPT, new=cut),
        greedy("min", COPY_PROMPT, new=30, min_new_tokens=cut, stop_token_ids=[ref_ids[1]]),
        greedy("regex", COPY_PROMPT, new=30, stop_regex=r"\d\d"),
    ]
    expected, want = outputs(make_scheduler(), cases)
    s = make_scheduler(speculative_max_batch_size=8, **SPEC)
    oracle(s, {**{c.rid: ref_ids for c in cases}}, wrong_every=4)
    got, reasons = outputs(s, cases)
    assert got == expected
    assert {k: type(v) for k, v in reasons.items()} == {k: type(v) for k, v in want.items()}
    assert s.info()["spec_verify_steps"] > 0


def test_context_limit_inside_a_chain(tiny_llama_path, tokenizer):
    def make(**kw) -> Scheduler:  # noqa: ANN003
        args = ServerArgs(model_path=str(tiny_llama_path), max_total_tokens=1024, **kw)
        return Scheduler(args, ModelRunner(tiny_llama_path, RunnerConfig(
            max_total_tokens=1024, max_context=50)), tokenizer)

    prompt = COPY_PROMPT[:40]
    expected, _ = outputs(make(), [greedy("ctx", prompt, new=30)])
    s = make(**SPEC)
    oracle(s, expected)
    got, reasons = outputs(s, [greedy("ctx", prompt, new=30)])
    assert got == expected and len(got["ctx"]) == 10
    assert isinstance(reasons["ctx"], FinishLength)
    assert s.info()["spec_accepted_tokens"] > 0


def test_logprobs_of_accepted_tokens_match_plain_decoding(make_scheduler):
    req = GenerateReq(rid="lp", input_ids=COPY_PROMPT, return_logprob=True, top_logprobs_num=2,
                      sampling=SamplingParams(temperature=0.0, max_new_tokens=20,
                                              ignore_eos=True))
    plain = make_scheduler()
    plain.add_request(req)
    spec = make_scheduler(**SPEC)
    oracle(spec, {"lp": outputs(make_scheduler(), [greedy("lp", COPY_PROMPT, new=20)])[0]["lp"]})
    spec.add_request(req)
    got = [_logprobs(s) for s in (plain, spec)]
    assert [t for _, t in got[0]] == [t for _, t in got[1]]
    assert all(abs(a - b) < 1e-4 for (a, _), (b, _) in zip(*got))
    assert spec.info()["spec_accepted_tokens"] > 0


def _logprobs(s: Scheduler) -> list[tuple[float, int]]:
    lps: list[tuple[float, int]] = []
    while s.has_work():
        for out in s.step():
            lps.extend(out.output_logprobs)
            assert len(out.output_top_logprobs) == len(out.output_logprobs)
    return lps


def test_batch_above_the_threshold_does_not_speculate(make_scheduler):
    reqs = [greedy(f"r{i}", COPY_PROMPT, new=12) for i in range(3)]
    s = make_scheduler(speculative_max_batch_size=2, **SPEC)
    expected, _ = outputs(make_scheduler(), reqs)
    got, _ = outputs(s, reqs)
    assert got == expected
    info = s.info()
    assert info["spec_verify_steps"] == 0 and info["spec_skipped_batch_steps"] > 0


def test_constrained_requests_jump_forward_in_a_batch_above_the_threshold(make_scheduler):
    """A step too wide to draft leaves a speculating constrained request as it would be with
    speculation off: it jump-forwards (the same forced tokens, in as many steps)."""
    reqs = [GenerateReq(rid=f"json{i}", input_ids=list(range(5, 25)),  # they step together
                        grammar=GrammarReq(json_schema=json.dumps(LONG_KEYS)),
                        sampling=SamplingParams(temperature=0.0, max_new_tokens=120))
            for i in range(3)]
    args = {"disable_radix_cache": True, "grammar_mask_wait_ms": 60_000}
    plain = make_scheduler(**args)
    expected, _ = outputs(plain, reqs)
    s = make_scheduler(speculative_max_batch_size=2, **args, **SPEC)
    got, reasons = outputs(s, reqs)
    assert got == expected
    assert all(isinstance(r, FinishStop) for r in reasons.values())
    info, plain_info = s.info(), plain.info()
    assert info["forced_tokens"] == plain_info["forced_tokens"] > 0, "it jump-forwards"
    assert info["steps"] == plain_info["steps"]
    assert info["spec_verify_steps"] == 0 and info["spec_skipped_batch_steps"] > 0


def test_a_request_can_opt_out(make_scheduler):
    s = make_scheduler(**SPEC)
    got, _ = outputs(s, [greedy("out", COPY_PROMPT, new=30, disable_speculation=True)])
    assert s.info()["spec_verify_steps"] == 0
    assert got == outputs(make_scheduler(), [greedy("out", COPY_PROMPT, new=30)])[0]


def test_a_drafts_price_is_fitted_to_the_forward_alone(make_scheduler):
    """A one-off cost outside the forward (a vocabulary built on the first lookup) must not
    read as "rows are free": the fit sees each forward's time, fixed + per row."""
    reqs = [greedy("copy", COPY_PROMPT, new=60)]
    expected, _ = outputs(make_scheduler(), reqs)
    s = make_scheduler(**SPEC)
    oracle(s, expected)  # long chains, some cut: steps of many row counts
    now, fixed, per_row = [0.0], 0.010, 0.003
    s.clock = lambda: now[0]
    real_forward, real_draft = s.runner.forward, s.speculator.draft

    def forward(batch):  # noqa: ANN001, ANN202
        now[0] += fixed + per_row * batch.num_tokens
        return real_forward(batch)

    def draft(decodes, chunks=()):  # noqa: ANN001, ANN202
        if s.counters["steps"] == 2:
            now[0] += 5.0  # once, outside the forward
        return real_draft(decodes, chunks)

    s.runner.forward, s.speculator.draft = forward, draft
    assert outputs(s, reqs)[0] == expected
    assert s.speculator.stats.summary()["spec_verify_steps"] > 0
    assert s.speculator.cost.fixed_rows == pytest.approx(fixed / per_row, rel=1e-6)


def test_rejected_drafts_never_enter_the_radix_cache(make_scheduler):
    s = make_scheduler(**SPEC)
    oracle(s, {"x": [1] * 40}, wrong_every=1)  # every chain wrong: all 1s
    got, _ = outputs(s, [greedy("x", COPY_PROMPT, new=20)])
    out = got["x"]
    assert s.info()["spec_verify_steps"] > 0
    for j in range(len(out)):
        if out[j] != 1:  # a rejected draft's position: its KV was given back, never cached
            assert s.kv.cached_prefix_len(COPY_PROMPT + out[:j] + [1, 1], "") <= \
                len(COPY_PROMPT) + j


def test_seeded_sampling_draws_the_same_tokens(make_scheduler):
    """A seeded request's noise depends on the output index only: each verified row draws
    exactly the token a plain step would."""
    reqs = [GenerateReq(rid=f"s{i}", input_ids=COPY_PROMPT, sampling=SamplingParams(
        temperature=0.8, top_k=20, seed=i, max_new_tokens=25, ignore_eos=True))
        for i in range(3)]
    expected, _ = outputs(make_scheduler(), reqs)
    s = make_scheduler(**SPEC)
    oracle(s, expected, wrong_every=2)
    assert outputs(s, reqs)[0] == expected
    assert s.info()["spec_accepted_tokens"] > 0


def test_sampled_tokens_keep_their_distribution(make_scheduler):
    """Unseeded sampling with a fixed draft for the second output token: its distribution
    matches plain sampling's (two-sample chi-square below the p = 0.001 critical value; the
    shared generator is seeded, so the outcome is deterministic)."""
    n = 300
    params = SamplingParams(temperature=1.0, top_k=3, max_new_tokens=3, ignore_eos=True)
    reqs = [GenerateReq(rid=f"u{i}", input_ids=COPY_PROMPT[:30], sampling=params)
            for i in range(n)]
    plain, _ = outputs(make_scheduler(), reqs)
    counts = Counter(ids[1] for ids in plain.values())
    likely = counts.most_common(1)[0][0]
    s = make_scheduler(speculative_max_batch_size=n, **SPEC)

    def fixed(req: Req) -> DraftChain:  # the draft for output token 1, from its step
        chain = DraftChain()
        if req.num_output == 1:
            chain.extend([likely], SOURCE_PROMPT_LOOKUP)
        return chain

    s.speculator.propose = fixed
    spec, _ = outputs(s, reqs)
    info = s.info()
    assert info["spec_verify_steps"] == n and 0 < info["spec_accept_rate"] < 1
    spec_counts = Counter(ids[1] for ids in spec.values())
    dof = len(set(counts) | set(spec_counts)) - 1
    assert _chi_square(counts, spec_counts) < _CHI2_CRIT_P001[dof], (counts, spec_counts)
    # the token after an accepted draft is sampled from the right row too
    after = [Counter(ids[2] for ids in run_.values() if ids[1] == likely)
             for run_ in (plain, spec)]
    dof = len(set(after[0]) | set(after[1])) - 1
    assert dof == 0 or _chi_square(*after) < _CHI2_CRIT_P001[dof]


# chi-square critical values at p = 0.001 by degrees of freedom
_CHI2_CRIT_P001 = {1: 10.83, 2: 13.82, 3: 16.27, 4: 18.47, 5: 20.52, 6: 22.46, 7: 24.32,
                   8: 26.12}
def _chi_square(a: Counter, b: Counter) -> float:
    """Two-sample chi-square statistic over the union of categories."""
    na, nb = sum(a.values()), sum(b.values())
    stat = 0.0
    for k in set(a) | set(b):
        total = a[k] + b[k]
        ea, eb = total * na / (na + nb), total * nb / (na + nb)
        stat += (a[k] - ea) ** 2 / ea + (b[k] - eb) ** 2 / eb
    return stat


def test_settings_use_sglang_names_and_are_checked():
    import argparse

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    args = ServerArgs.from_cli_args(parser.parse_args([
        "--model-path", "m", "--speculative-algorithm", "NGRAM",
        "--speculative-num-draft-tokens", "8", "--speculative-ngram-min-match-window-size", "2",
        "--speculative-ngram-max-match-window-size", "6", "--speculative-max-batch-size", "2"]))
    assert (args.speculative_algorithm, args.speculative_num_draft_tokens,
            args.speculative_ngram_min_match_window_size,
            args.speculative_ngram_max_match_window_size, args.speculative_max_batch_size) == \
        ("NGRAM", 8, 2, 6, 2)
    assert ServerArgs(model_path="m").speculative_algorithm is None, "off by default"
    for bad in ({"speculative_algorithm": "EAGLE"}, {"speculative_num_draft_tokens": 0},
                {"speculative_ngram_min_match_window_size": 5,
                 "speculative_ngram_max_match_window_size": 4}):
        with pytest.raises(ValueError, match="speculative"):
            ServerArgs(model_path="m", **bad)


@pytest.mark.parametrize(("params", "kept"), [({}, 2), ({"ignore_eos": True}, 4),
                                              ({"ignore_eos": True, "stop_token_ids": [77]}, 3)])
def test_chains_end_at_a_stop_token(make_scheduler, monkeypatch, params, kept):
    """No draft follows an EOS id (unless the request ignores EOS) or a stop token id: kept,
    the output ends there; refused, so is every draft after it."""
    from radixlm.runtime.speculative.draft_budget import DraftBudget

    lookup = [55, 4, 77, 88]  # 4: <|im_end|>, an EOS id of the tiny model
    monkeypatch.setattr(NgramLookup, "match", lambda self, ids, want, tail=(): (lookup, 3))
    monkeypatch.setattr(DraftBudget, "take", lambda self, row_cost=0.0: 6)
    s = make_scheduler(**SPEC)
    s.add_request(GenerateReq(rid="stop", input_ids=COPY_PROMPT, sampling=SamplingParams(
        temperature=0.0, max_new_tokens=20, **params)))
    s.step()  # the prefill: the request now decodes
    assert s.speculator.propose(s.running[0]).tokens == lookup[:kept]
