"""Offline batched greedy generation straight on a :class:`ModelRunner` (no cache, no server).

Used by the runner benchmark and the runner's exactness tests: prefill every prompt in one
extend batch, then decode all live sequences together one token per step. The serving engine
(scheduler, radix cache, sampling) is the real path; this one measures the runner alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from .forward_batch import SeqSpec
from .model_runner import ModelRunner
from .page_allocator import pages_of


@dataclass
class _Seq:
    tokens: list[int]
    slots: list[int] = field(default_factory=list)
    output: list[int] = field(default_factory=list)
    done: bool = False


def greedy_generate(
    runner: ModelRunner,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    stop_token_ids: Sequence[int] = (),
) -> list[list[int]]:
    """Greedy continuation of each prompt; a sequence stops after emitting a stop id.

    All KV pages taken are returned to the allocator before this function returns.
    """
    seqs = [_Seq(tokens=list(p)) for p in prompts]
    stops = set(stop_token_ids)
    try:
        specs = [_grow(runner, s, s.tokens) for s in seqs]
        logits = runner.forward(specs)
        for step in range(max_new_tokens):
            live = [s for s in seqs if not s.done]
            for s, row in zip(live, logits.argmax(dim=-1).tolist()):
                s.output.append(row)
                s.done = row in stops or len(s.output) >= max_new_tokens
            live = [s for s in seqs if not s.done]
            if not live or step == max_new_tokens - 1:
                break
            logits = runner.forward([_grow(runner, s, [s.output[-1]]) for s in live])
    finally:
        for s in seqs:
            runner.allocator.free(pages_of(s.slots, runner.allocator.page_size))
    return [s.output for s in seqs]


def _grow(runner: ModelRunner, seq: _Seq, new_tokens: list[int]) -> SeqSpec:
    new_slots, _ = runner.allocator.extend_slots(seq.slots, len(new_tokens), True)
    seq.slots.extend(new_slots)
    return SeqSpec(new_token_ids=new_tokens, kv_slots=torch.tensor(seq.slots))
