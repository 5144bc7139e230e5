"""One model step's input: a mix of extend and decode requests, flattened into token rows.

Every request contributes ``n >= 1`` new tokens whose KV will be written to the last ``n`` of
its ``kv_slots``; the first ``len(kv_slots) - n`` slots hold its cached prefix. A request with
exactly one new token goes through decode attention, the others through extend attention, in
the same forward.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..kernels import DecodePlan, plan_decode


@dataclass(frozen=True)
class SeqSpec:
    """One request's part of a forward."""

    new_token_ids: Sequence[int]
    kv_slots: Sequence[int] | torch.Tensor  # whole sequence after this step: prefix + new
    # Return logits for new tokens from this index on; None = the last new token only.
    logits_start: int | None = None

    @property
    def num_new(self) -> int:
        return len(self.new_token_ids)

    @property
    def prefix_len(self) -> int:
        return len(self.kv_slots) - len(self.new_token_ids)


class ContextLengthError(ValueError):
    """A sequence would run past the model's context window."""


@dataclass
class ForwardBatch:
    """Tensors for one forward; built by :meth:`build`, read by the model's layers."""

    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    out_cache_loc: torch.Tensor  # [T] pool slot receiving each new token's K/V
    ext_rows: torch.Tensor | None  # [Te] token rows of extend requests (None: no extend)
    ext_qo_indptr: torch.Tensor | None  # [Be + 1]
    ext_kv_indptr: torch.Tensor | None  # [Be + 1]
    ext_kv_indices: torch.Tensor | None  # [sum of extend KV lengths]
    dec_rows: torch.Tensor | None  # [Bd] token rows of decode requests (None: no decode)
    dec_kv_indptr: torch.Tensor | None  # [Bd + 1]
    dec_kv_indices: torch.Tensor | None
    logits_rows: torch.Tensor  # [N] rows whose logits are returned
    logits_indptr: list[int]  # request i owns output rows logits_indptr[i]:logits_indptr[i+1]
    _plans: dict[int, DecodePlan] = field(default_factory=dict)

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    def decode_plan(self, sliding_window: int) -> DecodePlan:
        """The padded decode layout for one window size, built once per forward."""
        plan = self._plans.get(sliding_window)
        if plan is None:
            assert self.dec_kv_indptr is not None and self.dec_kv_indices is not None
            plan = plan_decode(self.dec_kv_indptr, self.dec_kv_indices, sliding_window)
            self._plans[sliding_window] = plan
        return plan

    @classmethod
    def build(
        cls, seqs: Sequence[SeqSpec], device: torch.device, max_context: int
    ) -> ForwardBatch:
        """Flatten ``seqs`` (in order) into one batch on ``device``."""
        if not seqs:
            raise ValueError("a forward batch needs at least one request")
        ids: list[int] = []
        pos: list[torch.Tensor] = []
        out_loc: list[torch.Tensor] = []
        ext: list[int] = []
        dec: list[int] = []
        slots_of: list[torch.Tensor] = []
        logits_rows: list[torch.Tensor] = []
        logits_indptr = [0]
        row = 0
        for i, s in enumerate(seqs):
            n = s.num_new
            slots = torch.as_tensor(s.kv_slots, dtype=torch.int64)
            if n < 1:
                raise ValueError(f"request {i}: expected at least one new token, got none")
            if slots.ndim != 1 or slots.shape[0] < n:
                raise ValueError(f"request {i}: kv_slots must list at least its {n} new tokens")
            if slots.shape[0] > max_context:
                raise ContextLengthError(
                    f"request {i}: sequence of {slots.shape[0]} tokens exceeds the model's "
                    f"context of {max_context}"
                )
            prefix = slots.shape[0] - n
            ids.extend(int(t) for t in s.new_token_ids)
            pos.append(torch.arange(prefix, prefix + n, dtype=torch.int64))
            out_loc.append(slots[prefix:])
            slots_of.append(slots)
            (dec if n == 1 else ext).append(i)
            start = n - 1 if s.logits_start is None else s.logits_start
            if not 0 <= start < n:
                raise ValueError(f"request {i}: logits_start {start} outside [0, {n})")
            logits_rows.append(torch.arange(row + start, row + n, dtype=torch.int64))
            logits_indptr.append(logits_indptr[-1] + n - start)
            row += n
        starts = torch.tensor([0] + [s.num_new for s in seqs], dtype=torch.int64).cumsum(0)

        def group(members: list[int]) -> tuple[torch.Tensor, ...] | tuple[None, ...]:
            if not members:
                return None, None, None, None
            rows = torch.cat([torch.arange(int(starts[i]), int(starts[i + 1])) for i in members])
            qo = torch.tensor([0] + [seqs[i].num_new for i in members]).cumsum(0)
            kv = torch.tensor([0] + [slots_of[i].shape[0] for i in members]).cumsum(0)
            indices = torch.cat([slots_of[i] for i in members])
            return rows, qo, kv, indices

        e_rows, e_qo, e_kv, e_idx = group(ext)
        d_rows, _, d_kv, d_idx = group(dec)

        def to(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.to(device, non_blocking=True)

        return cls(
            input_ids=torch.tensor(ids, dtype=torch.int64, device=device),
            positions=torch.cat(pos).to(device),
            out_cache_loc=torch.cat(out_loc).to(device),
            ext_rows=to(e_rows),
            ext_qo_indptr=to(e_qo),
            ext_kv_indptr=to(e_kv),
            ext_kv_indices=to(e_idx),
            dec_rows=to(d_rows),
            dec_kv_indptr=to(d_kv),
            dec_kv_indices=to(d_idx),
            logits_rows=torch.cat(logits_rows).to(device),
            logits_indptr=logits_indptr,
        )
