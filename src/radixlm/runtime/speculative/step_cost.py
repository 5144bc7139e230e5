"""What a draft row costs in the step it joins, measured on the running model: the price
:class:`~.draft_budget.DraftBudget` weighs a chain's expected tokens against.

A decode step's time is modelled as ``fixed + per_row * rows`` (``rows``: the forward's
tokens, one per plain decode, ``1 + k`` per verification of ``k`` drafts). A plain step at
batch ``B`` yields ``B`` tokens for ``fixed + B * per_row``, so one request's share of it is
``fixed / B + per_row``, and a draft row costs ``per_row`` of it: in plain-step shares,
``row_cost(B) = B / (F + B)`` with ``F = fixed / per_row``, the step's fixed part in rows.
The row cost grows with the batch: at batch 1 the fixed part (streaming the weights, the
scheduler's per-step work) dwarfs a row, at batch 8 a row is most of a request's share.

Measured (``benchmarks/speculative_verify_cost.py`` and ``speculative.py --tasks
draft_cost``: SmolLM2 135M, its Q4_1 GGUF blocks, 1 thread, thread CPU time on a shared core):
through the scheduler at batch 1 a step with 1, 4, 8 rejected drafts cost 1.51, 2.27, 3.12
plain steps (about ``1.25 + 0.24 k``: ``F`` about 3); forward only, 8 requests on a
1,552-token passage, 1 and 3 drafts each cost 1.69 and 3.06 plain steps (``0.7`` a row:
``F`` about 3.4). The block kernels' passes were compute-bound at a few rows, so a row cost
nearly as much as a token of a small model. Since a verify's rows run bound like the plain
step (``models/native_decode.py``), each weight block decoded once for all of them
(``native/gguf_blocks_few.h``) and each key row read once (``avx512_attention_decode.h``),
forward only, batch 1, 1, 3 and 8 drafts cost 1.13, 1.49 and 2.59 plain forwards at 200
tokens of context and 1.06, 1.44 and 2.50 at 1,552 (``F`` about 4); the fit found 2.9-6.8
over speculative.py's rows (main's RAG fit had drifted to 0.65, pricing a row at 0.6).
With float32 weights (dequantized) the step streams 4x the bytes and ``F`` is ~25-100. So
``F`` is measured: a decayed least-squares fit of the forward's time against rows over the
pure decode steps (no prefill chunk), in the scheduler's thread CPU time when torch runs on
one thread, else wall time;
:data:`PRIOR_FIXED_ROWS` until the steps seen differ enough in rows to fit. Only the forward
is timed: the rest of a step holds one-off costs (a vocabulary or a mask built on first
use: ~260 ms once in a RAG run) that a fit of whole steps read as "a 1-row step is dear,
rows are free", so it drafted 8 tokens a step at a row cost near 0 for the next ~50 steps;
the verify path's own fixed part is :data:`~.draft_budget.VERIFY_ROWS`.
"""

from __future__ import annotations

PRIOR_FIXED_ROWS = 3.0  # F before a fit: SmolLM2's GGUF blocks at 1 thread (module doc)
MIN_FIXED_ROWS, MAX_FIXED_ROWS = 0.5, 200.0  # a fit outside is noise
DECAY = 0.98  # weight of older steps in the fit (about the last 50 count)
MIN_SPREAD = 1.0  # rows' weighted variance needed before the fit is used


class StepCostModel:
    """Decayed least-squares fit of decode-step time against forward rows (see module doc)."""

    __slots__ = ("w", "sx", "sy", "sxx", "sxy")

    def __init__(self) -> None:
        self.w = self.sx = self.sy = self.sxx = self.sxy = 0.0

    def observe(self, rows: int, seconds: float) -> None:
        """A decode step's forward (no prefill chunk) of ``rows`` tokens took ``seconds``."""
        if rows <= 0 or seconds <= 0.0:
            return
        self.w = DECAY * self.w + 1.0
        self.sx = DECAY * self.sx + rows
        self.sy = DECAY * self.sy + seconds
        self.sxx = DECAY * self.sxx + rows * rows
        self.sxy = DECAY * self.sxy + rows * seconds

    @property
    def fixed_rows(self) -> float:
        """``F``: the step's fixed time in rows, fitted, else :data:`PRIOR_FIXED_ROWS`."""
        if self.w <= 0.0:
            return PRIOR_FIXED_ROWS
        mx, my = self.sx / self.w, self.sy / self.w
        var = self.sxx / self.w - mx * mx
        if var < MIN_SPREAD:
            return PRIOR_FIXED_ROWS
        per_row = (self.sxy / self.w - mx * my) / var
        if per_row <= 0.0:
            return MAX_FIXED_ROWS  # rows cost nothing measurable
        fixed = my - per_row * mx
        return min(max(fixed / per_row, MIN_FIXED_ROWS), MAX_FIXED_ROWS)

    def row_cost(self, batch: int) -> float:
        """A draft row's cost in plain-step shares of one request at ``batch`` requests."""
        batch = max(batch, 1)
        return batch / (self.fixed_rows + batch)
