"""Checking a captured ``/generate`` exchange against transformers on the same weights.

For each prompt text the server received: the text is tokenized by the GGUF's own tokenizer
(the count must equal the server's ``prompt_tokens``), and one teacher-forced transformers
forward over prompt + output gives, at every position,

* for an unconstrained greedy gen: the output token must be transformers' argmax (so
  transformers' greedy decoding yields exactly these tokens);
* for a regex-constrained gen: the output token must be transformers' highest-ranked token
  that keeps the text a prefix of a match (checked with the ``regex`` package's partial
  matching, independent of radixlm's fsm), EOS only once the text fully matches;
* for scored prompt tokens (select): the token ids equal the tokenizer's and each logprob is
  transformers' within ``LOGPROB_TOL``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex
import torch

LOGPROB_TOL = 5e-3  # logits agree within 1e-4 x scale (~30); a logprob within 2x that
CANDIDATES = 64  # transformers' top tokens searched for the first one a regex allows


@dataclass(frozen=True)
class Exchange:
    """One ``/generate`` call as the client saw it: request body, status and response."""

    url: str
    body: dict[str, Any]
    status: int
    response: Any


def check_generate(hf: Any, tok: Any, exchange: Exchange) -> int:
    """Assert the exchange agrees with transformers; the number of tokens checked."""
    body, res = exchange.body, exchange.response
    texts = body["text"] if isinstance(body["text"], list) else [body["text"]]
    results = res if isinstance(res, list) else [res]
    params = body.get("sampling_params") or {}
    checked = 0
    for text, out in zip(texts, results):
        ids = tok(text).input_ids
        assert len(ids) == out["meta_info"]["prompt_tokens"], (text[-80:], len(ids))
        gen = list(out.get("output_ids") or [])
        with torch.no_grad():
            logits = hf(torch.tensor([ids + gen])).logits[0].float()
        if gen:
            assert params.get("temperature") == 0, "only greedy gens can be checked"
            checked += _check_output(tok, logits[len(ids) - 1:], gen, params.get("regex"))
        checked += _check_prompt_logprobs(logits, ids, out["meta_info"])
    return checked


def _check_output(tok: Any, logits: torch.Tensor, gen: list[int], pattern: str | None) -> int:
    eos = {tok.eos_token_id, *tok.all_special_ids}
    for k, token in enumerate(gen):
        if pattern is None:
            want = int(logits[k].argmax())
        else:
            want = _best_allowed(tok, logits[k], gen[:k], pattern, eos)
        assert token == want, (f"token {k}: radixlm {token} {tok.decode([token])!r}, "
                               f"transformers {want} {tok.decode([want])!r}")
    return len(gen)


def _best_allowed(tok: Any, row: torch.Tensor, prefix: list[int], pattern: str,
                  eos: set[int]) -> int:
    text = tok.decode(prefix)
    for cand in row.argsort(descending=True)[:CANDIDATES].tolist():
        if cand in eos:
            if regex.fullmatch(pattern, text):
                return cand
        elif regex.fullmatch(pattern, tok.decode(prefix + [cand]), partial=True):
            return cand
    raise AssertionError(f"none of transformers' top {CANDIDATES} tokens fits {pattern!r}")


def _check_prompt_logprobs(logits: torch.Tensor, ids: list[int], meta: dict) -> int:
    entries = meta.get("input_token_logprobs") or []
    start = len(ids) - len(entries)
    logprobs = torch.log_softmax(logits, dim=-1)
    checked = 0
    for pos, (lp, token, *_) in enumerate(entries, start):
        assert token == ids[pos], f"prompt token {pos}: server {token}, tokenizer {ids[pos]}"
        if lp is None or pos == 0:
            continue
        ref = float(logprobs[pos - 1, token])
        assert abs(lp - ref) <= LOGPROB_TOL, f"prompt token {pos}: {lp} vs {ref}"
        checked += 1
    return checked


def mean_scores(hf: Any, tok: Any, exchange: Exchange) -> tuple[list[float], list[float]]:
    """Per choice of a select exchange: radixlm's and transformers' mean logprob over the
    scored tokens (the ranking both give the choices); each logprob checked as above."""
    ours, theirs = [], []
    for text, out in zip(exchange.body["text"], exchange.response):
        ids = tok(text).input_ids
        with torch.no_grad():
            logits = hf(torch.tensor([ids])).logits[0].float()
        _check_prompt_logprobs(logits, ids, out["meta_info"])
        logprobs = torch.log_softmax(logits, dim=-1)
        entries = out["meta_info"]["input_token_logprobs"]
        start = len(ids) - len(entries)
        rows = [(pos, lp, t) for pos, (lp, t, *_) in enumerate(entries, start)
                if lp is not None and pos > 0]
        ours.append(sum(lp for _, lp, _ in rows) / len(rows))
        theirs.append(sum(float(logprobs[p - 1, t]) for p, _, t in rows) / len(rows))
    return ours, theirs
