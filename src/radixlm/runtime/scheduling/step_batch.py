"""The forward batch of one scheduler step: its decode tokens, then its prefill chunks.

Pure over its arguments: what the scheduler chose becomes the runner's
:class:`~..model.forward_batch.ForwardBatch` (token ids, each request's KV slots, lengths and
the first row whose logits are needed); nothing is reserved or released here.

A decoding request verifying ``k`` drafts runs ``1 + k`` tokens, each with its logits. They
enter the batch as ``1 + k`` one-token decodes over the request's slot row, the ``j``-th
seeing the keys up to its own position (the KV of every row is stored before any row attends,
so each sees the drafts before it): row ``j`` is computed by the decode attention of a plain
step (the same kernel, so the same arithmetic), the requests sharing a prefix read it once
(the decode plan's groups), and a step of decodes and verifications keeps the decode-only
batch. As one extend per request it went through extend attention instead: SmolLM2, GGUF,
1 thread, 8 requests on a 1,552-token passage with 3 drafts each cost 4.2 plain steps, ~60%
of it attention over the shared prefix (``benchmarks/speculative_verify_cost.py``). The
batch's ``logits_indptr`` is then regrouped per request, so request ``i`` owns rows
``logits_indptr[i]:logits_indptr[i + 1]`` as before.
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
    with a chain in ``drafts`` (by request id; its slots reserved too) runs its last token and
    the drafts as one-token decodes, with logits for every row (its verification: module
    doc)."""
    drafts = drafts or {}
    rows: list[int] = []  # per batch entry: its request's slot row
    seq_lens: list[int] = []
    ext: list[int] = []
    starts: list[int] = []
    ids: list[int] = []
    entries = [0]  # batch entries before each request (regrouping the logits rows)
    for r in decodes:
        assert r.kv is not None
        chain = drafts.get(r.rid)
        tokens = [r.token_ids[-1], *(chain.tokens if chain else ())]  # the newest: no KV yet
        first = r.kv.kv_len - len(tokens)  # KV computed before this step
        for j, token in enumerate(tokens):  # one decode per row (module doc)
            ids.append(token)
            rows.append(r.kv.row)
            seq_lens.append(first + j + 1)
            ext.append(1)
            starts.append(-1)
        entries.append(len(rows))
    for c in chunks:
        assert c.req.kv is not None
        ids.extend(c.req.token_ids[c.start : c.start + c.n])
        rows.append(c.req.kv.row)
        seq_lens.append(c.req.kv.kv_len)
        ext.append(c.n)
        starts.append(logits_start(c))
        entries.append(len(rows))
    lens = torch.tensor(seq_lens)
    table = kv_table[torch.tensor(rows), : int(lens.max())].to(runner.device)
    batch = ForwardBatch.from_table(
        seq_slots=table, seq_lens=lens, ext_lens=torch.tensor(ext), input_ids=ids,
        logits_starts=torch.tensor(starts), device=runner.device,
        max_context=max_context, page_size=runner.config.page_size,
        workspace=runner.workspace,
    )
    if len(entries) < len(rows) + 1:  # some request verifies: its rows as one range
        batch.logits_indptr = [batch.logits_indptr[e] for e in entries]
    return batch


def logits_start(c: PrefillChunk) -> int:
    """First row of this chunk whose logits are needed (prompt logprobs), or -1."""
    pos = c.req.scored_from(c.start, c.n)
    return -1 if pos is None else pos - c.start
