"""Batched sampling: penalties, logit bias, temperature, top-k / top-p / min-p, seeds, logprobs.

All per-request parameters become [B] tensors and every step of the pipeline runs on the whole
batch at once. Greedy rows take the argmax. Sampled rows use the exponential-race form of
categorical sampling (``argmax(p / E)``, ``E ~ Exp(1)``) so that a request with a ``seed`` draws
its noise from its own generator: the same seed gives the same text whatever else is batched.
Logprobs are those of the distribution the token was drawn from before penalties and
temperature, but after the constraint's mask (as SGLang and vLLM report them): a token the
grammar forbids has probability 0, reported as :data:`MIN_LOGPROB` (a finite floor, as the
OpenAI API reports impossible tokens), so every logprob is a finite JSON number.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from ...kernels.cpu.row_argmax import argmax_rows as cpu_argmax_rows
from ..wire.sampling_params import SamplingParams, logit_bias_ids

# The logprob reported for a token of probability 0 (masked by a constraint, or below float
# range); -inf is not JSON.
MIN_LOGPROB = -9999.0


@dataclass
class SampleRow:
    """What the sampler needs from one request."""

    params: SamplingParams
    output_ids: Sequence[int]
    prompt_ids: Sequence[int]
    banned_ids: Sequence[int] = ()  # e.g. EOS/stop ids before min_new_tokens is reached
    step: int = 0  # index of the token being sampled (seeds the per-request noise)


@dataclass
class SampleResult:
    next_ids: list[int]
    logprobs: list[float] | None  # logprob of each chosen id (when asked)
    top_logprobs: list[list[tuple[float, int]]] | None


def finite_logprobs(logits: torch.Tensor) -> torch.Tensor:
    """log_softmax over the last dim [.., V], floored at :data:`MIN_LOGPROB` (masked = -inf
    logits become the floor; NaN, never expected, too)."""
    lp = torch.log_softmax(logits.float(), dim=-1)
    return torch.nan_to_num(lp, nan=MIN_LOGPROB).clamp_(min=MIN_LOGPROB)


def top_logprobs(logprobs: torch.Tensor, k: int) -> list[list[tuple[float, int]]]:
    """The ``k`` best (logprob, id) per row of ``logprobs`` [B, V], ``k`` clamped to V."""
    vals, ids = logprobs.topk(min(k, logprobs.shape[-1]), dim=-1)
    return [list(zip(v, i)) for v, i in zip(vals.tolist(), ids.tolist())]


def apply_penalties(logits: torch.Tensor, rows: Sequence[SampleRow]) -> None:
    """Frequency/presence (OpenAI) over output tokens; repetition (HF) over prompt + output."""
    b, v = logits.shape
    device = logits.device
    freq = torch.tensor([r.params.frequency_penalty for r in rows], device=device)
    pres = torch.tensor([r.params.presence_penalty for r in rows], device=device)
    rep = torch.tensor([r.params.repetition_penalty for r in rows], device=device)
    if bool((freq != 0).any() | (pres != 0).any()):
        counts = torch.zeros(b, v, device=device)
        for i, r in enumerate(rows):
            if r.output_ids:
                ids = torch.tensor(list(r.output_ids), device=device).clamp(max=v - 1)
                counts[i].index_add_(0, ids, torch.ones(len(ids), device=device))
        logits -= freq[:, None] * counts + pres[:, None] * (counts > 0)
    if bool((rep != 1).any()):
        seen = torch.zeros(b, v, dtype=torch.bool, device=device)
        for i, r in enumerate(rows):
            if r.params.repetition_penalty != 1:
                ids = list(r.prompt_ids) + list(r.output_ids)
                seen[i, torch.tensor(ids, device=device).clamp(max=v - 1)] = True
        penalised = torch.where(logits > 0, logits / rep[:, None], logits * rep[:, None])
        logits.copy_(torch.where(seen, penalised, logits))


def apply_logit_bias(logits: torch.Tensor, rows: Sequence[SampleRow]) -> None:
    """Add each row's ``logit_bias`` (token id -> bias) to its logits [B, V]."""
    for i, r in enumerate(rows):
        if r.params.logit_bias:
            bias = logit_bias_ids(r.params)
            ids = torch.tensor(list(bias), device=logits.device)
            logits[i].index_add_(0, ids, torch.tensor(list(bias.values()),
                                                      device=logits.device))


def _filter_probs(probs: torch.Tensor, rows: Sequence[SampleRow]) -> torch.Tensor:
    """Zero out what top-k, top-p and min-p exclude; probs [B, V] sorted internally."""
    device = probs.device
    top_k = torch.tensor([r.params.top_k if r.params.top_k > 0 else probs.shape[1]
                          for r in rows], device=device)
    top_p = torch.tensor([r.params.top_p for r in rows], device=device)
    min_p = torch.tensor([r.params.min_p for r in rows], device=device)
    sorted_p, order = probs.sort(dim=-1, descending=True)
    rank = torch.arange(probs.shape[1], device=device)[None, :]
    cum = sorted_p.cumsum(dim=-1)
    drop = (rank >= top_k[:, None]) | (cum - sorted_p > top_p[:, None])
    drop |= sorted_p < min_p[:, None] * sorted_p[:, :1]
    drop[:, 0] = False  # the most likely token always survives
    sorted_p = sorted_p.masked_fill(drop, 0.0)
    return torch.zeros_like(probs).scatter_(1, order, sorted_p)


def _noise(rows: Sequence[SampleRow], v: int, device: torch.device,
           shared: torch.Generator) -> torch.Tensor:
    """Exp(1) noise [B, V]; seeded rows use a generator seeded by (seed, step)."""
    out = torch.empty(len(rows), v)
    for i, r in enumerate(rows):
        if r.params.seed is None:
            out[i].exponential_(generator=shared)
        else:
            gen = torch.Generator().manual_seed(r.params.seed * 1_000_003 + r.step)
            out[i].exponential_(generator=gen)
    return out.to(device)


def argmax_rows(x: torch.Tensor) -> torch.Tensor:
    """``x.argmax(dim=-1)`` (the first maximum of each row). On CPU one native pass
    (``kernels/cpu/row_argmax.py``: ~30 us a 262k row against torch's ~220 us); elsewhere
    ``max(dim=-1)``, the same indices and faster than torch's argmax on CPU."""
    if x.device.type == "cpu":
        return cpu_argmax_rows(x)
    return x.max(dim=-1).indices


def sample(
    logits: torch.Tensor,
    rows: Sequence[SampleRow],
    generator: torch.Generator,
    want_logprobs: bool = False,
    top_logprobs_num: int = 0,
) -> SampleResult:
    """Pick one token per row of ``logits`` [B, V] (float32; modified in place)."""
    logprobs = finite_logprobs(logits) if want_logprobs or top_logprobs_num else None
    if any(r.params.uses_penalties for r in rows):
        apply_penalties(logits, rows)
    apply_logit_bias(logits, rows)
    for i, r in enumerate(rows):
        if r.banned_ids:
            logits[i, torch.tensor(list(r.banned_ids)).clamp(max=logits.shape[1] - 1)] = -1e30
    greedy = torch.tensor([r.params.is_greedy for r in rows], device=logits.device)
    next_ids = argmax_rows(logits)
    if not bool(greedy.all()):
        temp = torch.tensor([max(r.params.temperature, 1e-5) for r in rows],
                            device=logits.device)
        probs = torch.softmax(logits / temp[:, None], dim=-1)
        probs = _filter_probs(probs, rows)
        race = probs / _noise(rows, logits.shape[1], logits.device, generator)
        next_ids = torch.where(greedy, next_ids, argmax_rows(race))
    chosen = next_ids.tolist()
    chosen_lp = top = None
    if logprobs is not None:
        chosen_lp = logprobs.gather(1, next_ids[:, None]).squeeze(1).tolist()
        if top_logprobs_num:
            top = top_logprobs(logprobs, top_logprobs_num)
    return SampleResult(chosen, chosen_lp, top)
