"""Prefill logits of a :class:`ModelRunner` against a transformers model on the same prompts.

Shared by the GGUF exactness tests (the real SmolLM2 file, the tiny per-architecture files).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..runtime.model.forward_batch import SeqSpec
from ..runtime.model.model_runner import ModelRunner


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
