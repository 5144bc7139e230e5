"""Decode attention: one new query token per request over its KV in the paged pool.

Reference (CPU path): gather each request's KV into a padded batch and run softmax attention.
When every request's slots follow its pages in order (slot ``i`` at offset ``i % page_size`` of
its ``i // page_size``-th page), whole pages are gathered instead of single tokens: a few large
contiguous copies instead of many small ones.

Cascade: when several requests share a long prefix of the *same* pool slots (a radix-cache
hit: one document, many questions), the prefix's K/V are read once and attended by all those
queries in one matmul; each request's own suffix is attended separately, and the two partial
softmaxes are merged with their log-sum-exp. Memory traffic for the shared part drops from
once per request to once per group; the result is the same attention.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .attention_common import (
    CascadeGroup,
    attend,
    check_attention_args,
    merge_partial,
    partial_attention,
    shared_prefix_groups,
)

# (q [N, Hkv, G, D], k, v [N, Hkv, L, D], mask, sm_scale, logit_cap) -> (out, lse): one part
PartialAttention = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None,
                             float, float], tuple[torch.Tensor, torch.Tensor]]


@dataclass(frozen=True)
class DecodePlan:
    """Padded gather layout for a decode batch, built once per forward and shared by layers."""

    index: torch.Tensor  # [B * L / unit] rows of the pool viewed as [-1, unit, Hkv, D]
    unit: int  # tokens per gathered row: page_size when page-structured, else 1
    batch: int
    max_len: int  # L, padded to a multiple of unit
    # [B, 1, 1, L] bool, True where the key is attended; None when every key is (no padding,
    # no window: SDPA then skips building its additive mask, with the same result)
    mask: torch.Tensor | None
    workspace: dict[str, torch.Tensor] | None = None  # reusable gather buffers
    groups: tuple[CascadeGroup, ...] = ()  # shared prefixes; the padded part is then suffixes
    # >= 0: ``index`` is the run span, span + 1, ... (one request on consecutive slots or
    # pages), so the keys are read as a view of the pool, no gather copy
    span: int = -1
    # one per group: the first slot when its prefix is consecutive slots (read as a view of
    # the pool), else -1 (gathered once per group and layer)
    prefix_spans: tuple[int, ...] = ()
    # with groups: each request's slots after its group's prefix (all of them for a request in
    # no group), ragged FlashInfer-style: int64 indptr [B + 1] and indices, for kernels that
    # read the suffixes straight from the pool (the native set's) instead of ``index``
    suffix_indptr: torch.Tensor | None = None
    suffix_indices: torch.Tensor | None = None


def _is_page_structured(slots: torch.Tensor, valid: torch.Tensor, page_size: int) -> bool:
    """True if valid ``slots[b, i]`` equals ``page(b, i // ps) * ps + i % ps``."""
    if page_size == 1 or slots.shape[1] % page_size:
        return page_size == 1
    pos = torch.arange(slots.shape[1], device=slots.device)
    offset_ok = (slots % page_size == pos % page_size) | ~valid
    first = slots[:, ::page_size].repeat_interleave(page_size, dim=1) // page_size
    page_ok = (slots // page_size == first) | ~valid
    return bool(offset_ok.all() and page_ok.all())


def plan_decode_padded(
    slots: torch.Tensor,
    lens: torch.Tensor,
    page_size: int = 1,
    sliding_window: int = 0,
    workspace: dict[str, torch.Tensor] | None = None,
    cascade: bool = True,
) -> DecodePlan:
    """Plan from padded slots [B, L'] (entries past ``lens[b]`` are ignored) and lens [B]."""
    lens = lens.long()
    groups: list[CascadeGroup] = []
    if cascade and sliding_window <= 0:
        groups = shared_prefix_groups(slots.long(), lens, lens - 1)
    if groups:
        return _suffix_plan(slots.long(), lens, groups, workspace)
    if lens.numel() and int(lens.min()) < 1:
        raise ValueError("lens: every decode request needs at least one KV token")
    batch = slots.shape[0]
    max_len = int(lens.max()) if batch else 0
    padded = -(-max_len // page_size) * page_size
    if slots.shape[1] < padded:
        slots = torch.nn.functional.pad(slots, (0, padded - slots.shape[1]))
    slots = slots[:, :padded].long()
    pos = torch.arange(padded, device=slots.device)
    valid = pos[None, :] < lens[:, None]  # [B, L]
    if _is_page_structured(slots, valid, page_size):
        unit, index = page_size, (slots[:, ::page_size] // page_size).masked_fill(
            ~valid[:, ::page_size], 0).reshape(-1)
    else:
        unit, index = 1, slots[:, :max_len].masked_fill(~valid[:, :max_len], 0).reshape(-1)
        padded, valid, pos = max_len, valid[:, :max_len], pos[:max_len]
    if sliding_window > 0:
        valid = valid & (pos[None, :] >= lens[:, None] - sliding_window)
    mask = None if bool(valid.all()) else valid[:, None, None, :]
    return DecodePlan(index, unit, batch, padded, mask, workspace,
                      span=_span_start(index, batch))


def _span_start(index: torch.Tensor, batch: int) -> int:
    """The first row when one request's gather ``index`` is consecutive rows, else -1 (with
    one request no entry is padding: its length sets the width)."""
    if batch != 1 or index.numel() == 0:
        return -1
    return _run_start(index)


def _run_start(index: torch.Tensor) -> int:
    """``index[0]`` when ``index`` is ``index[0], index[0] + 1, ...``, else -1."""
    start = int(index[0])
    run = torch.arange(start, start + index.numel(), device=index.device)
    return start if torch.equal(index, run) else -1


def _suffix_plan(slots: torch.Tensor, lens: torch.Tensor, groups: list[CascadeGroup],
                 workspace: dict[str, torch.Tensor] | None) -> DecodePlan:
    """Token-wise padded plan over each request's slots after its group's shared prefix."""
    start = torch.zeros_like(lens)
    for g in groups:
        start[g.members] = g.prefix.numel()
    suffix = lens - start
    width = int(suffix.max())
    pos = torch.arange(width, device=slots.device)
    valid = pos[None, :] < suffix[:, None]
    cols = (start[:, None] + pos[None, :]).clamp(max=slots.shape[1] - 1)
    own = slots.gather(1, cols)  # [B, W]
    index = own.masked_fill(~valid, 0).reshape(-1)
    indptr = torch.zeros(slots.shape[0] + 1, dtype=torch.long, device=slots.device)
    torch.cumsum(suffix, 0, out=indptr[1:])
    return DecodePlan(index, 1, slots.shape[0], width, valid[:, None, None, :], workspace,
                      tuple(groups), prefix_spans=tuple(_run_start(g.prefix) for g in groups),
                      suffix_indptr=indptr, suffix_indices=own[valid].contiguous())


def plan_decode(
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sliding_window: int = 0,
    page_size: int = 1,
    workspace: dict[str, torch.Tensor] | None = None,
) -> DecodePlan:
    """Plan from FlashInfer-style ragged ``kv_indptr`` [B+1] / ``kv_indices``."""
    lens = (kv_indptr[1:] - kv_indptr[:-1]).long()
    max_len = int(lens.max()) if lens.numel() else 0
    pos = torch.arange(max_len, device=kv_indptr.device)
    flat = (kv_indptr[:-1, None].long() + pos[None, :]).clamp(max=max(kv_indices.numel() - 1, 0))
    slots = kv_indices.long()[flat] if kv_indices.numel() else flat
    return plan_decode_padded(slots, lens, page_size, sliding_window, workspace)


def _gather(cache: torch.Tensor, plan: DecodePlan, name: str) -> torch.Tensor:
    """[B, Hkv, L, D] view of the gathered rows (buffer reused across layers when given)."""
    h, d = cache.shape[2], cache.shape[3]
    rows = cache.view(-1, plan.unit * h * d)
    if plan.span >= 0:  # a view of the pool: no copy
        got = rows[plan.span:plan.span + plan.index.numel()]
        return got.view(plan.batch, plan.max_len, h, d).transpose(1, 2)
    out = None
    if plan.workspace is not None:
        numel = plan.index.numel() * rows.shape[1]
        buf = plan.workspace.get(name)
        if buf is None or buf.numel() < numel or buf.dtype != cache.dtype:
            buf = torch.empty(numel, dtype=cache.dtype, device=cache.device)
            plan.workspace[name] = buf
        out = buf[:numel].view(-1, rows.shape[1])
    got = torch.index_select(rows, 0, plan.index, out=out) if out is not None else \
        torch.index_select(rows, 0, plan.index)
    return got.view(plan.batch, plan.max_len, h, d).transpose(1, 2)


def check_decode_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
) -> None:
    """The attention checks, plus one ``kv_indptr`` entry per query and one more."""
    check_attention_args(q, k_cache, v_cache, kv_indptr, kv_indices)
    if kv_indptr.shape[0] != q.shape[0] + 1:
        raise ValueError(
            f"kv_indptr: expected {q.shape[0] + 1} entries for {q.shape[0]} queries, "
            f"got {kv_indptr.shape[0]}"
        )


def decode_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    logit_cap: float = 0.0,
    sliding_window: int = 0,
    plan: DecodePlan | None = None,
) -> torch.Tensor:
    """Attention of q [B, Hq, D] over each request's KV; returns [B, Hq, D]."""
    check_decode_args(q, k_cache, v_cache, kv_indptr, kv_indices)
    if q.shape[0] == 0:
        return torch.empty_like(q)
    if plan is None:
        plan = plan_decode(kv_indptr, kv_indices, sliding_window, k_cache.shape[1])
    k = _gather(k_cache, plan, "k")
    v = _gather(v_cache, plan, "v")
    if not plan.groups:
        out = attend(q.unsqueeze(2), k, v, plan.mask, sm_scale, logit_cap)  # [B, Hq, 1, D]
        return out.squeeze(2)
    return _cascade(q, k, v, plan, k_cache, v_cache, sm_scale, logit_cap)


def _cascade(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, plan: DecodePlan,
             k_cache: torch.Tensor, v_cache: torch.Tensor, sm_scale: float,
             logit_cap: float) -> torch.Tensor:
    """Shared-prefix parts per group + per-request suffixes, merged by log-sum-exp."""
    b, hq, d = q.shape
    hkv = k.shape[1]
    out, lse = partial_attention(q.view(b, hkv, hq // hkv, d), k, v, plan.mask, sm_scale,
                                 logit_cap)  # suffixes
    o_p, l_p = group_prefix_parts(q, k_cache, v_cache, plan, sm_scale, logit_cap)
    return merge_partial(out, lse, o_p, l_p).reshape(b, hq, d).to(q.dtype)


def group_prefix_parts(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                       plan: DecodePlan, sm_scale: float, logit_cap: float,
                       part: PartialAttention = partial_attention
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention of every request over its group's shared prefix: (out [B, Hkv, G, D]
    normalized, lse [B, Hkv, G, 1]); a request in no group has out 0 and lse -inf (zero weight
    in :func:`~.attention_common.merge_partial`). Each group's prefix K/V are read once: all
    its members' query heads of one KV head form one matmul's rows. ``part`` computes each
    group's part (:func:`~.attention_common.partial_attention`'s signature; a kernel set may
    pass its own)."""
    b, hq, d = q.shape
    hkv = k_cache.shape[2]
    qg = q.view(b, hkv, hq // hkv, d)
    spans = plan.prefix_spans or (-1,) * len(plan.groups)
    out = lse = None
    for g, span in zip(plan.groups, spans, strict=True):
        kp = _prefix_rows(k_cache, g, span).transpose(0, 1)  # [Hkv, Lp, D]
        vp = _prefix_rows(v_cache, g, span).transpose(0, 1)
        n = g.members.numel()
        # every member in order (one document, all questions): slices, no index copies
        whole = n == b and _run_start(g.members) == 0
        members = slice(None) if whole else g.members
        qm = qg[members].permute(1, 0, 2, 3).reshape(hkv, -1, d)  # [Hkv, n * G, D]
        o_p, l_p = part(qm[None], kp[None], vp[None], None, sm_scale, logit_cap)
        o_p = o_p[0].view(hkv, n, -1, d).permute(1, 0, 2, 3)
        l_p = l_p[0].view(hkv, n, -1, 1).permute(1, 0, 2, 3)
        if whole:
            return o_p, l_p
        if out is None:
            out = q.new_zeros(qg.shape, dtype=torch.float32)
            lse = torch.full((*qg.shape[:3], 1), float("-inf"), device=q.device)
        out[members], lse[members] = o_p, l_p
    assert out is not None and lse is not None, "a cascade plan has at least one group"
    return out, lse


def _prefix_rows(cache: torch.Tensor, group: CascadeGroup, span: int) -> torch.Tensor:
    """[Lp, Hkv, D] keys or values of a group's shared prefix: a view of the pool when its
    slots are consecutive (``span`` the first), else one gather for the whole group."""
    flat = cache.view(-1, cache.shape[2], cache.shape[3])
    if span >= 0:
        return flat[span:span + group.prefix.numel()]
    return flat.index_select(0, group.prefix)
