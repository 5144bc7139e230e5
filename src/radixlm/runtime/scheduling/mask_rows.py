"""One step's token-mask rows, filled by the mask gate before the forward.

The gate (:mod:`mask_gate`) admits a constrained request into the step once its mask is ready;
it copies that mask into this buffer right then, so that after the forward nothing is left to
fill: :meth:`StepMaskRows.gather` hands the sampled rows' masks to the kernel. The step's
time on masks is then the gate's alone, and the gate's bound covers it (a fill loop run after
the forward used to add ~0.2 ms on top of the bound: there the caches and TLBs hold the
model's weights, not the masks, the matchers or the interpreter's own data).

A row is valid for its request while the matcher is the one it was filled from, at the same
token count: nothing advances a matcher between the gate and the step's sampling (tokens are
accepted after it), so a mismatch means the caller did something else and the row is filled
again. Rows are cleared at each step's start.
"""

from __future__ import annotations

from typing import Any

import torch

from ...fsm import GrammarError
from .request import Req


class StepMaskRows:
    """A ``[rows, ceil(vocab/32)]`` int32 bitmask buffer reused across steps, and which
    request each row belongs to (see module doc)."""

    def __init__(self, vocab_size: int) -> None:
        self._buf = torch.zeros(0, (vocab_size + 31) // 32, dtype=torch.int32)
        self._np = self._buf.numpy()  # numpy rows: the matchers' fastest fill path
        self._rows: dict[str, tuple[int, Any, int]] = {}  # rid -> (row, matcher, num_tokens)
        self._faults: dict[str, Exception] = {}  # rid -> what its fill raised (not a budget)
        self._used = 0  # rows filled this step (a refill takes a new row: rows never move)
        self.cold = 0  # fills this step that computed their mask (none was ready)

    def clear(self) -> None:
        """Forget the rows of the previous step (the buffer is kept)."""
        self._rows.clear()
        self._faults.clear()
        self._used = 0
        self.cold = 0

    def has(self, req: Req) -> bool:
        """Whether ``req``'s row holds the mask of its matcher's current state."""
        entry = self._rows.get(req.rid)
        return (entry is not None and entry[1] is req.grammar
                and entry[2] == req.grammar.num_tokens)

    def fill(self, req: Req) -> None:
        """Copy the mask of ``req``'s current state into its row (computed here if it is not
        ready: counted in :attr:`cold`). A budget hit sets ``req.grammar_error`` (the output
        processor ends the request); any other exception is kept for :meth:`gather`. Either
        way the row allows every token, so the batch goes on."""
        if self.has(req):
            return
        row = self._used
        if row == self._buf.shape[0]:
            self._grow()
        self._used += 1
        self._faults.pop(req.rid, None)
        matcher = req.grammar
        out = self._np[row]
        counters = matcher.grammar.waits
        before = counters.count
        try:
            matcher.fill_bitmask(out)
            if req.grammar_closing:  # near max_new_tokens: only tokens that still close
                remaining = req.sampling.max_new_tokens - req.num_output
                req.budget_closed |= matcher.close_within(out, remaining)
        except GrammarError as exc:  # over budget: end this request, not the batch
            req.grammar_error = str(exc)
            out[:] = -1
        except Exception as exc:  # a bug in one matcher: fail that request only
            self._faults[req.rid] = exc
            out[:] = -1
        self.cold += counters.count - before
        self._rows[req.rid] = (row, matcher, matcher.num_tokens)

    def gather(self, reqs: list[Req]) -> tuple[torch.Tensor, list[tuple[Req, Exception]]]:
        """The ``[len(reqs), words]`` masks of ``reqs`` in that order (each filled before:
        :meth:`has`), and the requests whose fill raised, with the exception."""
        order = [self._rows[r.rid][0] for r in reqs]
        faults = [(r, self._faults[r.rid]) for r in reqs if r.rid in self._faults]
        if order == list(range(len(order))):  # the gate's order, no refill: a view
            return self._buf[: len(order)], faults
        return self._buf[torch.tensor(order, dtype=torch.int64)], faults

    def _grow(self) -> None:
        old = self._buf
        self._buf = torch.zeros(max(2, 2 * old.shape[0]), old.shape[1], dtype=torch.int32)
        self._buf[: old.shape[0]] = old
        self._np = self._buf.numpy()
