"""A short CPU training run so the tiny model's text is not pure noise.

Uses transformers' own modeling code (training is not the runtime's job); the result is saved
as an ordinary checkpoint that the runtime then loads through its own loader.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence

import torch

logger = logging.getLogger(__name__)


def pack_tokens(docs: Sequence[list[int]], seq_len: int, eos_id: int) -> torch.Tensor:
    """Concatenate documents (EOS between them) into rows of ``seq_len`` tokens."""
    flat: list[int] = []
    for ids in docs:
        flat.extend(ids)
        flat.append(eos_id)
    rows = len(flat) // seq_len
    return torch.tensor(flat[: rows * seq_len], dtype=torch.long).view(rows, seq_len)


def train_for(
    model: torch.nn.Module,
    data: torch.Tensor,
    seconds: float,
    *,
    batch_size: int = 16,
    lr: float = 3e-3,
    seed: int = 0,
) -> list[float]:
    """Train on random rows of ``data`` until ``seconds`` pass; returns the loss per step."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01, betas=(0.9, 0.95))
    model.train()
    losses: list[float] = []
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        frac = (time.monotonic() - start) / seconds
        for group in opt.param_groups:  # cosine decay over the time budget
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * min(frac, 1.0)))
        idx = torch.randint(0, data.shape[0], (batch_size,), generator=gen)
        batch = data[idx]
        loss = model(input_ids=batch, labels=batch).loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(loss.item())
        if len(losses) % 50 == 0:
            logger.info("step %d loss %.3f", len(losses), losses[-1])
    model.eval()
    return losses
