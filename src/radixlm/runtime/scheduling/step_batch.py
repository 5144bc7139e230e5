"""The forward batch of one scheduler step: its decode tokens, then its prefill chunks.

Pure over its arguments: what the scheduler chose becomes the runner's
:class:`~..model.forward_batch.ForwardBatch` (token ids, each request's KV slots, lengths and
the first row whose logits are needed); nothing is reserved or released here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import torch

from ..model.forward_batch import ForwardBatch
from .request import PrefillChunk, Req

if TYPE_CHECKING:
    from ..model.model_runner import ModelRunner
    from ..speculative.draft_chain import DraftChain


def build_step_batch(decodes: list[Req], chunks: list[PrefillChunk], kv_table: torch.Tensor,
                     runner: ModelRunner, max_context: int,
                     drafts: Mapping[str, DraftChain] | None = None) -> ForwardBatch:
    """One forward over the decode tokens then the prefill chunks, in that order.

    ``kv_table``: the KV manager's [rows, max_context] slot table, indexed by each request's
    row (every request here holds KV, reserved for the tokens it runs). A decoding request
    with a chain in ``drafts`` (by request id; its slots reserved too) runs as an extend of
    its last token and the drafts, with logits for every row (its verification)."""
    drafts = drafts or {}
    reqs = decodes + [c.req for c in chunks]
    ids: list[int] = []
    starts: list[int] = []
    ext: list[int] = []
    for r in decodes:
        chain = drafts.get(r.rid)
        ids.append(r.token_ids[-1])  # the newest token: the one without KV
        if chain:
            ids.extend(chain.tokens)
        starts.append(0 if chain else -1)
        ext.append(1 + len(chain) if chain else 1)
    for c in chunks:
        ids.extend(c.req.token_ids[c.start : c.start + c.n])
        starts.append(logits_start(c))
    rows = torch.tensor([r.kv.row for r in reqs])
    seq_lens = torch.tensor([r.kv.kv_len for r in reqs])
    ext_lens = torch.tensor(ext + [c.n for c in chunks])
    table = kv_table[rows, : int(seq_lens.max())].to(runner.device)
    return ForwardBatch.from_table(
        seq_slots=table, seq_lens=seq_lens, ext_lens=ext_lens, input_ids=ids,
        logits_starts=torch.tensor(starts), device=runner.device,
        max_context=max_context, page_size=runner.config.page_size,
        workspace=runner.workspace,
    )


def logits_start(c: PrefillChunk) -> int:
    """First row of this chunk whose logits are needed (prompt logprobs), or -1."""
    pos = c.req.scored_from(c.start, c.n)
    return -1 if pos is None else pos - c.start
