"""Prefill logits (and greedy tokens) of a :class:`ModelRunner` against a transformers model on
the same prompts.

Shared by the GGUF exactness tests (the real SmolLM2 and Gemma 3 files, the tiny
per-architecture files) and the family tests (config variants of a tiny checkpoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from ..runtime.model.forward_batch import SeqSpec
from ..runtime.model.model_runner import ModelRunner, RunnerConfig
from .greedy import greedy_generate

TOL = 1e-4  # x the logit scale (largest |logit| of the reference)


def assert_prefill_matches_hf(runner: ModelRunner, hf: torch.nn.Module,
                              prompts: Sequence[Sequence[int]], rel_tol: float,
                              min_std: float) -> None:
    """Every prefill logit row of ``prompts`` (one extend batch) within ``rel_tol`` of
    transformers', relative to the largest |transformers logit| of that prompt; reference
    logits with std below ``min_std`` fail as degenerate (the check would be vacuous)."""
    specs = []
    for ids in prompts:
        slots, _ = runner.allocator.extend_slots([], len(ids), True)
        specs.append(SeqSpec(list(ids), list(slots), logits_start=0))
    logits = runner.forward(specs)  # [sum(len(prompt)), vocab]
    row = 0
    for ids in prompts:
        with torch.no_grad():
            ref = hf(torch.tensor([list(ids)])).logits[0].float()
        ours = logits[row:row + len(ids)]
        row += len(ids)
        scale = ref.abs().max().item()
        diff = (ours - ref).abs().max().item()
        assert ref.std() > min_std, "degenerate reference logits would make the check vacuous"
        assert diff <= rel_tol * scale, f"max logit diff {diff:.3g} vs scale {scale:.3g}"


def assert_runner_matches_hf(path: Path, ids: list[int], new: int,
                             **hf_kwargs: Any) -> ModelRunner:
    """Prefill logits (:data:`TOL` of the logit scale) and ``new`` greedy tokens of a runner on
    the folder ``path`` equal transformers' (loaded in float32 with ``hf_kwargs``)."""
    from transformers import AutoModelForCausalLM

    hf = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **hf_kwargs).eval()
    runner = ModelRunner(path, RunnerConfig(page_size=4, max_total_tokens=512))
    slots, _ = runner.allocator.extend_slots([], len(ids), True)
    logits = runner.forward([SeqSpec(ids, slots, logits_start=0)])
    with torch.no_grad():
        ref = hf(torch.tensor([ids])).logits[0]
    assert ref.std() > 0.01, "degenerate reference logits would make the check vacuous"
    torch.testing.assert_close(logits, ref, atol=TOL * ref.abs().max().item(), rtol=0)
    ours = greedy_generate(runner, [ids], new)[0]
    expected = hf.generate(torch.tensor([ids]), max_new_tokens=new, do_sample=False,
                           attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                           eos_token_id=None)[0, len(ids):].tolist()
    assert ours == expected[: len(ours)] and len(ours) == new
    return runner


def hf_greedy_tokens(hf: torch.nn.Module, prompts: Sequence[Sequence[int]], new_tokens: int,
                     eos_token_id: int | None, pad_token_id: int | None = None
                     ) -> list[list[int]]:
    """transformers' greedy continuation of each prompt alone (up to ``new_tokens``, stopping
    after ``eos_token_id``)."""
    out = []
    for ids in prompts:
        with torch.no_grad():
            gen = hf.generate(torch.tensor([list(ids)]), max_new_tokens=new_tokens,
                              do_sample=False, eos_token_id=eos_token_id,
                              pad_token_id=pad_token_id,
                              attention_mask=torch.ones(1, len(ids), dtype=torch.long))
        out.append(gen[0, len(ids):].tolist())
    return out
