"""Offline batched greedy generation straight on a :class:`ModelRunner` (no cache, no server).

Used by the runner benchmark and the runner's exactness tests: prefill every prompt in one
extend batch, then decode all live sequences together one token per step, with slots kept in a
request-to-token table as the scheduler keeps them. The serving engine (scheduler, radix cache,
sampling) is the real path; this one measures the runner alone.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..runtime.memory.page_allocator import pages_of
from ..runtime.model.forward_batch import ForwardBatch
from ..runtime.model.model_runner import ModelRunner
from ..runtime.model.sampler import argmax_rows


def greedy_generate(
    runner: ModelRunner,
    prompts: Sequence[Sequence[int]],
    max_new_tokens: int,
    stop_token_ids: Sequence[int] = (),
    step_logits: list[list[torch.Tensor]] | None = None,
) -> list[list[int]]:
    """Greedy continuation of each prompt; a sequence stops after emitting a stop id.

    ``step_logits``, if given, gets one list per prompt of the logits row ``[vocab]`` each
    of its tokens was taken from (to compare with another engine's, step by step).
    All KV pages taken are returned to the allocator before this function returns.
    """
    n = len(prompts)
    lens = [len(p) for p in prompts]
    table = torch.zeros(n, max(lens) + max_new_tokens, dtype=torch.int64)
    outputs: list[list[int]] = [[] for _ in prompts]
    stops = set(stop_token_ids)
    try:
        for i, p in enumerate(prompts):
            slots, _ = runner.allocator.extend_slots([], len(p), True)
            table[i, : len(p)] = torch.tensor(slots)
        live = list(range(n))
        ids: list[int] = [t for p in prompts for t in p]
        ext = lens[:]
        for _ in range(max_new_tokens):
            batch = ForwardBatch.from_table(
                seq_slots=table[live].to(runner.device),
                seq_lens=torch.tensor([lens[i] for i in live]), ext_lens=torch.tensor(ext),
                input_ids=ids, logits_starts=torch.full((len(live),), -1),
                device=runner.device, max_context=runner.max_context,
                page_size=runner.config.page_size, workspace=runner.workspace)
            logits = runner.forward(batch)
            next_ids = argmax_rows(logits).tolist()
            for row, (i, t) in enumerate(zip(live, next_ids)):
                outputs[i].append(t)
                if step_logits is not None:
                    step_logits[i].append(logits[row].float().clone())
            live = [i for i in live if outputs[i][-1] not in stops
                    and len(outputs[i]) < max_new_tokens]
            if not live:
                break
            for i in live:  # one more slot each for the token fed next
                slot, _ = runner.allocator.extend_slots(table[i, : lens[i]], 1, True)
                table[i, lens[i]] = slot[0]
                lens[i] += 1
            ids, ext = [outputs[i][-1] for i in live], [1] * len(live)
    finally:
        for i in range(n):
            runner.allocator.free(pages_of(table[i, : lens[i]].tolist(),
                                           runner.allocator.page_size))
    return outputs
