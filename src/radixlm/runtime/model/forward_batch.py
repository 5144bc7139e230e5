"""One model step's input: a mix of extend and decode requests, flattened into token rows.

Request ``b`` has ``seq_lens[b]`` tokens of KV after this step, the last ``ext_lens[b] >= 1``
of which are new (their K/V are written during the forward); the earlier ones are its cached
prefix. Slots come from a padded table ``[B, L]`` (a view of the scheduler's request-to-token
table, or built from :class:`SeqSpec` lists). A request with exactly one new token goes through
decode attention, the others through extend attention, in the same forward. Metadata is built
with a fixed number of tensor ops, whatever the batch size.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import torch

from ...kernels import DecodePlan

# A kernel set's decode planner (KernelOps.plan_decode): padded slots [Bd, L], lens [Bd],
# page size, sliding window, workspace -> its plan, or None when its kernel needs none.
DecodePlanner = Callable[..., DecodePlan | None]


@dataclass(frozen=True)
class SeqSpec:
    """One request's part of a forward (convenience form of the inputs)."""

    new_token_ids: Sequence[int]
    kv_slots: Sequence[int] | torch.Tensor  # whole sequence after this step: prefix + new
    # Return logits for new tokens from this index on; None = the last new token only.
    logits_start: int | None = None

    @property
    def num_new(self) -> int:
        return len(self.new_token_ids)


class ContextLengthError(ValueError):
    """A sequence would run past the model's context window."""


def _ragged(slots: torch.Tensor, lens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Padded [B, L] + lens [B] -> FlashInfer-style (indptr [B+1], indices)."""
    pos = torch.arange(slots.shape[1], device=slots.device)
    indices = slots[pos[None, :] < lens[:, None]]
    indptr = torch.zeros(lens.shape[0] + 1, dtype=torch.int64, device=slots.device)
    torch.cumsum(lens, 0, out=indptr[1:])
    return indptr, indices


@dataclass
class ForwardBatch:
    """Tensors for one forward; built by :meth:`build`, read by the model's layers."""

    input_ids: torch.Tensor  # [T]
    positions: torch.Tensor  # [T]
    out_cache_loc: torch.Tensor  # [T] pool slot receiving each new token's K/V
    seq_slots: torch.Tensor  # [B, L] padded slots of each request's whole sequence
    seq_lens: torch.Tensor  # [B]
    ext_lens: torch.Tensor  # [B]
    page_size: int
    logits_rows: torch.Tensor  # [N] token rows whose logits are returned
    logits_indptr: list[int]  # request b owns output rows logits_indptr[b]:logits_indptr[b+1]
    dec_reqs: torch.Tensor  # [Bd] requests with one new token
    ext_reqs: torch.Tensor  # [Be] requests with several
    dec_rows: torch.Tensor  # [Bd] their token rows
    ext_rows: torch.Tensor  # [Te]
    workspace: dict[str, torch.Tensor] | None = None
    _plans: dict[int, DecodePlan | None] = field(default_factory=dict)  # by sliding window
    cache: dict[str, torch.Tensor] = field(default_factory=dict)  # per-forward derived tensors

    @property
    def num_tokens(self) -> int:
        return int(self.input_ids.shape[0])

    @property
    def has_decode(self) -> bool:
        return self.dec_reqs.numel() > 0

    @property
    def has_extend(self) -> bool:
        return self.ext_reqs.numel() > 0

    @cached_property
    def _dec_ragged(self) -> tuple[torch.Tensor, torch.Tensor]:
        return _ragged(self.seq_slots[self.dec_reqs], self.seq_lens[self.dec_reqs])

    @cached_property
    def _ext_ragged(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        indptr, indices = _ragged(self.seq_slots[self.ext_reqs], self.seq_lens[self.ext_reqs])
        qo = torch.zeros_like(indptr)
        torch.cumsum(self.ext_lens[self.ext_reqs], 0, out=qo[1:])
        return qo, indptr, indices

    @property
    def dec_kv_indptr(self) -> torch.Tensor:
        return self._dec_ragged[0]

    @property
    def dec_kv_indices(self) -> torch.Tensor:
        return self._dec_ragged[1]

    @property
    def ext_qo_indptr(self) -> torch.Tensor:
        return self._ext_ragged[0]

    @property
    def ext_kv_indptr(self) -> torch.Tensor:
        return self._ext_ragged[1]

    @property
    def ext_kv_indices(self) -> torch.Tensor:
        return self._ext_ragged[2]

    def decode_plan(self, sliding_window: int, plan_decode: DecodePlanner) -> DecodePlan | None:
        """The decode requests' plan for one window size from the kernel set's planner
        (``KernelOps.plan_decode``), built on first use and shared by every layer of this
        forward; ``None`` where the set's decode kernel takes no plan."""
        if sliding_window not in self._plans:
            self._plans[sliding_window] = plan_decode(
                self.seq_slots[self.dec_reqs], self.seq_lens[self.dec_reqs], self.page_size,
                sliding_window, self.workspace,
            )
        return self._plans[sliding_window]

    @classmethod
    def build(
        cls,
        seqs: Sequence[SeqSpec],
        *,
        device: torch.device,
        max_context: int,
        page_size: int = 1,
        workspace: dict[str, torch.Tensor] | None = None,
    ) -> ForwardBatch:
        """Build from per-request specs (tests, offline generation)."""
        if not seqs:
            raise ValueError("a forward batch needs at least one request")
        slot_rows = [torch.as_tensor(s.kv_slots, dtype=torch.int64) for s in seqs]
        table = torch.nn.utils.rnn.pad_sequence(slot_rows, batch_first=True)
        starts = [-1 if s.logits_start is None else s.logits_start for s in seqs]
        return cls.from_table(
            seq_slots=table.to(device),
            seq_lens=torch.tensor([len(r) for r in slot_rows], dtype=torch.int64),
            ext_lens=torch.tensor([s.num_new for s in seqs], dtype=torch.int64),
            input_ids=[t for s in seqs for t in s.new_token_ids],
            logits_starts=torch.tensor(starts, dtype=torch.int64),
            device=device, max_context=max_context, page_size=page_size, workspace=workspace,
        )

    @classmethod
    def from_table(
        cls,
        *,
        seq_slots: torch.Tensor,
        seq_lens: torch.Tensor,
        ext_lens: torch.Tensor,
        input_ids: Sequence[int] | torch.Tensor,
        logits_starts: torch.Tensor,
        device: torch.device,
        max_context: int,
        page_size: int = 1,
        workspace: dict[str, torch.Tensor] | None = None,
    ) -> ForwardBatch:
        """Build from a padded slot table [B, L] (on ``device``), lengths and new token ids.

        ``logits_starts[b]`` is the first new-token index whose logits are returned, or -1 for
        the last new token only.
        """
        ext = _checked_ext_lens(seq_slots, seq_lens, ext_lens, input_ids, logits_starts,
                                max_context)
        if all(e == 1 for e in ext):
            return cls._decode_only(seq_slots, seq_lens.to(device), ext_lens.to(device),
                                    input_ids, device, page_size, workspace)
        return cls._general(seq_slots, seq_lens, ext_lens, input_ids, logits_starts, device,
                            page_size, workspace)

    @classmethod
    def _decode_only(cls, seq_slots: torch.Tensor, seq_lens: torch.Tensor,
                     ext_lens: torch.Tensor, input_ids: Sequence[int] | torch.Tensor,
                     device: torch.device,
                     page_size: int, workspace: dict[str, torch.Tensor] | None) -> ForwardBatch:
        """:meth:`_general`'s batch when every request decodes one token (validated): token row
        ``b`` is request ``b`` at position ``seq_lens[b] - 1`` and returns its logits (a
        start can only be 0 or -1 there), so the metadata is a few aranges, not ~20 ops.
        Half a batch-1 step's metadata time at one thread."""
        rows = torch.arange(seq_lens.shape[0], device=device)
        positions = seq_lens.to(torch.int64) - 1
        none = rows[:0]
        return cls(
            input_ids=torch.as_tensor(input_ids, dtype=torch.int64).to(device),
            positions=positions, out_cache_loc=seq_slots[rows, positions],
            seq_slots=seq_slots, seq_lens=seq_lens, ext_lens=ext_lens,
            page_size=page_size, logits_rows=rows, logits_indptr=list(range(rows.shape[0] + 1)),
            dec_reqs=rows, ext_reqs=none, dec_rows=rows, ext_rows=none, workspace=workspace,
        )

    @classmethod
    def _general(cls, seq_slots: torch.Tensor, seq_lens: torch.Tensor, ext_lens: torch.Tensor,
                 input_ids: Sequence[int] | torch.Tensor, logits_starts: torch.Tensor,
                 device: torch.device, page_size: int,
                 workspace: dict[str, torch.Tensor] | None) -> ForwardBatch:
        """Any mix of extend and decode requests (validated arguments)."""
        seq_lens, ext_lens = seq_lens.to(device), ext_lens.to(device)
        starts = torch.where(logits_starts < 0, ext_lens.cpu() - 1, logits_starts).to(device)
        num_reqs, num_tokens = ext_lens.shape[0], int(ext_lens.sum())
        tok_req = torch.repeat_interleave(torch.arange(num_reqs, device=device), ext_lens)
        first_row = torch.cumsum(ext_lens, 0) - ext_lens  # [B] first token row of each request
        offset = torch.arange(num_tokens, device=device) - first_row[tok_req]  # j within request
        positions = (seq_lens - ext_lens)[tok_req] + offset
        is_dec = ext_lens == 1
        n_logits = ext_lens - starts
        logits_rows = torch.arange(num_tokens, device=device)[offset >= starts[tok_req]]
        indptr = [0] + torch.cumsum(n_logits, 0).tolist()
        return cls(
            input_ids=torch.as_tensor(input_ids, dtype=torch.int64).to(device),
            positions=positions,
            out_cache_loc=seq_slots[tok_req, positions],
            seq_slots=seq_slots,
            seq_lens=seq_lens,
            ext_lens=ext_lens,
            page_size=page_size,
            logits_rows=logits_rows,
            logits_indptr=indptr,
            dec_reqs=torch.nonzero(is_dec).flatten(),
            ext_reqs=torch.nonzero(~is_dec).flatten(),
            dec_rows=torch.nonzero(is_dec[tok_req]).flatten(),
            ext_rows=torch.nonzero(~is_dec[tok_req]).flatten(),
            workspace=workspace,
        )


def _checked_ext_lens(seq_slots: torch.Tensor, seq_lens: torch.Tensor, ext_lens: torch.Tensor,
                      input_ids: Sequence[int] | torch.Tensor, logits_starts: torch.Tensor,
                      max_context: int) -> list[int]:
    """``ext_lens`` as a list once :func:`_validate`'s conditions hold (checked on Python
    lists: a step's few requests cost ~10 torch reductions there, ~5% of a batch-1 decode
    step), else :func:`_validate` raises its error."""
    lens, ext, starts = seq_lens.tolist(), ext_lens.tolist(), logits_starts.tolist()
    if not (ext and min(ext) >= 1 and all(n >= e for n, e in zip(lens, ext))
            and max(lens) <= max_context and seq_slots.shape[1] >= max(lens)
            and len(input_ids) == sum(ext) and all(-1 <= s < e for s, e in zip(starts, ext))
            and len(lens) == len(ext) == len(starts)):
        _validate(seq_slots, seq_lens, ext_lens, input_ids, logits_starts, max_context)
    return ext


def _validate(
    seq_slots: torch.Tensor,
    seq_lens: torch.Tensor,
    ext_lens: torch.Tensor,
    input_ids: Sequence[int] | torch.Tensor,
    logits_starts: torch.Tensor,
    max_context: int,
) -> None:
    if ext_lens.numel() == 0:
        raise ValueError("a forward batch needs at least one request")
    if int(ext_lens.min()) < 1:
        raise ValueError(f"every request needs at least one new token, got {ext_lens.tolist()}")
    if bool((seq_lens < ext_lens).any()):
        raise ValueError("kv_slots must list at least the new tokens of each request")
    longest = int(seq_lens.max())
    if longest > max_context:
        b = int(seq_lens.argmax())
        raise ContextLengthError(
            f"request {b}: sequence of {longest} tokens exceeds the model's context of "
            f"{max_context}"
        )
    if seq_slots.shape[1] < longest:
        raise ValueError(f"slot table has {seq_slots.shape[1]} columns, needs {longest}")
    if len(input_ids) != int(ext_lens.sum()):
        raise ValueError(f"expected {int(ext_lens.sum())} input ids, got {len(input_ids)}")
    bad = (logits_starts >= ext_lens) | (logits_starts < -1)
    if bool(bad.any()):
        b = int(torch.nonzero(bad)[0])
        raise ValueError(
            f"request {b}: logits_start {int(logits_starts[b])} outside [0, {int(ext_lens[b])})"
        )
