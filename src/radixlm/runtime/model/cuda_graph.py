"""Bookkeeping for CUDA graphs of decode steps: batch-size buckets, padding, static inputs.

A CUDA graph replays fixed kernel launches on fixed addresses, so a decode step of ``n``
requests runs as the graph captured for the smallest bucket ``>= n``, its inputs copied into
buffers allocated once (stable addresses) and rows ``n..bucket`` padded. A padded row decodes
token 0 at position 0 of a one-token sequence whose only slot is ``padding_slot``: a KV slot
no request owns, so the padded rows' K/V writes land there and never touch a real sequence.
Batches above the largest bucket, or with any prefill row, run eagerly.

Everything here is plain tensor work and runs (and is tested) on CPU. The capture and replay
(:class:`DecodeGraph`) need CUDA and refuse to start without it. This module is NOT wired into
the model runner: it has never run on a GPU, and today's decode forward cannot be captured as
is (``ForwardBatch.from_table`` and the decode plan read lengths back to the host, and the
plan's width follows the longest sequence), so enabling it is future GPU work.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .forward_batch import ForwardBatch


def default_buckets(max_batch: int) -> tuple[int, ...]:
    """1, 2, 4, 8, then every multiple of 8 up to ``max_batch`` (which is always included).

    Fine steps at small sizes, where a padded row costs most relative to the batch; steps of
    8 above, so padding wastes at most 7 rows.
    """
    if max_batch < 1:
        raise ValueError(f"max_batch must be >= 1, got {max_batch}")
    small = [b for b in (1, 2, 4) if b < max_batch]
    return tuple(sorted({*small, *range(8, max_batch + 1, 8), max_batch}))


@dataclass(frozen=True)
class DecodeGraphConfig:
    """Which batch sizes get a graph and the fixed input layout; validated on construction."""

    buckets: tuple[int, ...]
    max_seq_len: int  # columns of the static slot table (the model's context)
    padding_slot: int  # a KV slot reserved for padded rows' writes

    def __post_init__(self) -> None:
        if not self.buckets:
            raise ValueError("buckets must name at least one batch size")
        if list(self.buckets) != sorted(set(self.buckets)) or self.buckets[0] < 1:
            raise ValueError(f"buckets must be positive, increasing and unique, got "
                             f"{self.buckets}")
        if self.max_seq_len < 1:
            raise ValueError(f"max_seq_len must be >= 1, got {self.max_seq_len}")
        if self.padding_slot < 0:
            raise ValueError(f"padding_slot must be >= 0, got {self.padding_slot}")

    @property
    def max_batch(self) -> int:
        return self.buckets[-1]


@dataclass(frozen=True)
class Replay:
    """Run the graph of ``bucket``; the first ``num_reqs`` rows are real."""

    bucket: int
    num_reqs: int

    @property
    def num_padded(self) -> int:
        return self.bucket - self.num_reqs


@dataclass(frozen=True)
class Eager:
    """Run without a graph, and why."""

    reason: str


def choose(config: DecodeGraphConfig, ext_lens: torch.Tensor) -> Replay | Eager:
    """Replay the smallest bucket holding a decode-only batch; otherwise eager."""
    n = int(ext_lens.numel())
    if n == 0:
        return Eager("empty batch")
    if bool((ext_lens != 1).any()):
        return Eager("the batch has prefill rows")
    if n > config.max_batch:
        return Eager(f"{n} requests exceed the largest bucket ({config.max_batch})")
    bucket = next(b for b in config.buckets if b >= n)
    return Replay(bucket, n)


class StaticDecodeInputs:
    """Decode inputs for the largest bucket, allocated once; a bucket uses the first rows.

    ``load`` copies a batch in place and returns views whose storage never changes, which is
    what a captured graph reads on replay.
    """

    def __init__(self, config: DecodeGraphConfig, device: torch.device) -> None:
        self.config = config
        rows, cols = config.max_batch, config.max_seq_len
        self.input_ids = torch.zeros(rows, dtype=torch.int64, device=device)  # [Bmax]
        self.seq_lens = torch.ones(rows, dtype=torch.int64, device=device)  # [Bmax]
        self.seq_slots = torch.full((rows, cols), config.padding_slot, dtype=torch.int64,
                                    device=device)  # [Bmax, L]

    def load(self, plan: Replay, input_ids: torch.Tensor, seq_lens: torch.Tensor,
             seq_slots: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Copy ``num_reqs`` real rows in, pad up to the bucket; views ``[:bucket]``.

        ``seq_slots`` is ``[n, L']`` with ``L' <= max_seq_len`` (entries past each length are
        ignored). Padded rows get token 0, length 1 and the padding slot.
        """
        n, b = plan.num_reqs, plan.bucket
        if input_ids.shape != (n,) or seq_lens.shape != (n,) or seq_slots.shape[0] != n:
            raise ValueError(f"expected {n} rows, got input_ids {tuple(input_ids.shape)}, "
                             f"seq_lens {tuple(seq_lens.shape)}, seq_slots "
                             f"{tuple(seq_slots.shape)}")
        width = seq_slots.shape[1]
        if width > self.config.max_seq_len:
            raise ValueError(f"slot table has {width} columns; the static one holds "
                             f"{self.config.max_seq_len}")
        self.input_ids[:n].copy_(input_ids)
        self.seq_lens[:n].copy_(seq_lens)
        self.seq_slots[:n, :width].copy_(seq_slots)
        self.seq_slots[:n, width:].fill_(self.config.padding_slot)
        self.input_ids[n:b].zero_()
        self.seq_lens[n:b].fill_(1)
        self.seq_slots[n:b].fill_(self.config.padding_slot)
        return self.input_ids[:b], self.seq_lens[:b], self.seq_slots[:b]

    def padded_batch(self, plan: Replay, input_ids: torch.Tensor, seq_lens: torch.Tensor,
                     seq_slots: torch.Tensor, page_size: int = 1,
                     workspace: dict[str, torch.Tensor] | None = None) -> ForwardBatch:
        """The decode batch padded to ``plan.bucket``, built over the static buffers.

        Its logits' first ``num_reqs`` rows are the real requests' (see :func:`unpad`).
        """
        ids, lens, slots = self.load(plan, input_ids, seq_lens, seq_slots)
        width = max(int(lens.max()), 1)
        ones = torch.ones(plan.bucket, dtype=torch.int64)
        return ForwardBatch.from_table(
            seq_slots=slots[:, :width], seq_lens=lens.cpu(), ext_lens=ones, input_ids=ids,
            logits_starts=torch.full((plan.bucket,), -1), device=ids.device,
            max_context=self.config.max_seq_len, page_size=page_size, workspace=workspace)


def unpad(logits: torch.Tensor, plan: Replay) -> torch.Tensor:
    """The real requests' rows of a padded step's output ``[bucket, ...]``."""
    if logits.shape[0] != plan.bucket:
        raise ValueError(f"expected {plan.bucket} rows, got {logits.shape[0]}")
    return logits[: plan.num_reqs]


class DecodeGraph:
    """One captured decode step (CUDA only): ``capture`` once, then ``replay`` per step.

    ``step`` must read only static buffers and launch the same kernels on every call; its
    output tensor is captured and overwritten in place by each replay.
    """

    def __init__(self, device: torch.device) -> None:
        if device.type != "cuda" or not torch.cuda.is_available():
            raise RuntimeError(f"CUDA graphs need a CUDA device, got {device} (CUDA available: "
                               f"{torch.cuda.is_available()}); run decode eagerly instead")
        self.device = device
        self.graph: torch.cuda.CUDAGraph | None = None
        self.output: torch.Tensor | None = None

    def capture(self, step: Callable[[], torch.Tensor], warmup: int = 2,
                pool: object | None = None) -> None:
        """Warm ``step`` up on a side stream (lazy init, autotuning), then capture it."""
        stream = torch.cuda.Stream(self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            for _ in range(warmup):
                step()
        torch.cuda.current_stream(self.device).wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph, pool=pool):
            self.output = step()

    def replay(self) -> torch.Tensor:
        """Run the captured step on whatever the static buffers hold now."""
        if self.graph is None or self.output is None:
            raise RuntimeError("replay before capture")
        self.graph.replay()
        return self.output
