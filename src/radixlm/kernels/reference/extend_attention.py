"""Extend attention: new tokens attend causally to themselves and fully to their cached prefix.

This is the RadixAttention case: request ``i`` has ``n_i`` new query tokens (rows
``qo_indptr[i]:qo_indptr[i+1]`` of q) and ``L_i >= n_i`` KV tokens whose last ``n_i`` are the
new ones; query ``j`` sits at absolute position ``L_i - n_i + j`` and sees keys up to it.
Prefill is the case of an empty prefix.

Cascade: requests whose cached prefixes share the same pool slots (many questions over one
document) attend that shared prefix in one matmul per group (all their query rows against
keys read once), then their own remaining keys causally; the two partial softmaxes are merged
by log-sum-exp (see :mod:`decode_attention`).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .attention_common import (
    CascadeGroup,
    attend,
    check_attention_args,
    merge_partial,
    partial_attention,
    shared_prefix_groups,
)
from .checks import INDEX_DTYPES, check_tensor

# a kernel for one request's new tokens over its own keys (see extend_attention_with)
CausalPart = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float, float, int,
                       torch.Tensor], torch.Tensor | None]
GROUP_SCORE_BUDGET = 8 * 1024 * 1024  # max score elements per group matmul (memory bound)
# A prefill chunk attends in blocks of this many query rows, each over the keys up to its last
# query only: the causal mask's upper triangle is skipped but for within-block parts (a
# 512-token first chunk: 5.6 -> 4.3 ms per layer, one thread; after 1,024 cached: 11.4 -> 10.4)
CAUSAL_ROW_BLOCK = 128


def causal_mask(
    num_new: int, kv_len: int, sliding_window: int, device: torch.device
) -> torch.Tensor:
    """[1, 1, n, L] bool: query j (absolute kv_len - n + j) attends keys at or before it."""
    q_pos = torch.arange(kv_len - num_new, kv_len, device=device)[:, None]
    k_pos = torch.arange(kv_len, device=device)[None, :]
    mask = k_pos <= q_pos
    if sliding_window > 0:
        mask &= k_pos > q_pos - sliding_window
    return mask[None, None]


def check_extend_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
) -> None:
    """The attention checks, plus a ``qo_indptr`` shaped like ``kv_indptr``."""
    check_attention_args(q, k_cache, v_cache, kv_indptr, kv_indices)
    check_tensor("qo_indptr", qo_indptr, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    if qo_indptr.shape != kv_indptr.shape:
        raise ValueError(
            f"qo_indptr: expected the shape of kv_indptr {tuple(kv_indptr.shape)}, "
            f"got {tuple(qo_indptr.shape)}"
        )


def extend_attention_ref(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    qo_indptr: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
    sm_scale: float,
    logit_cap: float = 0.0,
    sliding_window: int = 0,
) -> torch.Tensor:
    """q [T, Hq, D] (all requests' new tokens, concatenated); returns [T, Hq, D]."""
    return _extend(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale, logit_cap,
                   sliding_window, None)


def extend_attention_with(causal_part: CausalPart) -> Callable[..., torch.Tensor]:
    """:func:`extend_attention_ref` (its signature) with ``causal_part(q_i [n, Hq, D], k_cache,
    v_cache, slots [L], sm_scale, logit_cap, first, out_i)`` for each request's new tokens
    over its own keys (the pools read by ``slots``, key position order) where it has no shared
    prefix and no window: it writes ``out_i`` (the request's rows of the result, ``[n, Hq,
    D]``) and returns it, or returns ``None`` having written nothing where the kernel does not
    apply (then torch's blocks run). The native set passes
    :func:`~radixlm.kernels.cpu.avx512_attention.causal_prefill_by_slot`."""

    def extend_attention(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                         qo_indptr: torch.Tensor, kv_indptr: torch.Tensor,
                         kv_indices: torch.Tensor, sm_scale: float, logit_cap: float = 0.0,
                         sliding_window: int = 0) -> torch.Tensor:
        return _extend(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices, sm_scale,
                       logit_cap, sliding_window, causal_part)
    return extend_attention


def _extend(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
            qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor,
            sm_scale: float, logit_cap: float, sliding_window: int,
            causal_part: CausalPart | None) -> torch.Tensor:
    check_extend_args(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices)
    qo = qo_indptr.tolist()
    kv = kv_indptr.tolist()
    if qo[-1] != q.shape[0]:
        raise ValueError(f"qo_indptr: last entry {qo[-1]} != number of query tokens {q.shape[0]}")
    for i in range(len(qo) - 1):
        n, kv_len = qo[i + 1] - qo[i], kv[i + 1] - kv[i]
        if kv_len < n:
            raise ValueError(f"request {i}: {kv_len} KV tokens cannot hold its {n} new tokens")
    groups = _groups(qo_indptr, kv_indptr, kv_indices) if sliding_window <= 0 else []
    skip = {int(m): g.prefix.numel() for g in groups for m in g.members}
    out = torch.empty_like(q)
    lse = torch.empty(q.shape[0], k_cache.shape[2], q.shape[1] // k_cache.shape[2], 1,
                      device=q.device) if groups else None
    batched = _own_keys_batched(q, k_cache, v_cache, kv_indices, qo, kv, skip, sm_scale,
                                logit_cap, out, lse) if skip else set()
    for i in range(len(qo) - 1):
        if qo[i + 1] > qo[i] and i not in batched:
            _own_keys(q, k_cache, v_cache, kv_indices, (qo[i], qo[i + 1]), (kv[i], kv[i + 1]),
                      skip.get(i, 0), sm_scale, logit_cap, sliding_window, out, lse,
                      causal_part)
    for g in groups:
        _shared_keys(q, k_cache, v_cache, qo, g, sm_scale, logit_cap, out, lse)
    return out


def _groups(qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor
            ) -> list[CascadeGroup]:
    if kv_indptr.shape[0] < 3 or kv_indices.numel() == 0:  # one request: nothing to share
        return []
    kv_lens = (kv_indptr[1:] - kv_indptr[:-1]).long()
    q_lens = (qo_indptr[1:] - qo_indptr[:-1]).long()
    pos = torch.arange(int(kv_lens.max()), device=kv_indptr.device)
    flat = (kv_indptr[:-1, None].long() + pos[None, :]).clamp(max=kv_indices.numel() - 1)
    return shared_prefix_groups(kv_indices.long()[flat], kv_lens, kv_lens - q_lens)


def _own_keys(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
              kv_indices: torch.Tensor, q_span: tuple[int, int], kv_span: tuple[int, int],
              skip: int, sm_scale: float, logit_cap: float, sliding_window: int,
              out: torch.Tensor, lse: torch.Tensor | None,
              causal_part: CausalPart | None = None) -> None:
    """Attention of one request's queries over its keys after the first ``skip`` (the shared
    prefix, handled per group); with ``skip`` the LSE is kept for the merge."""
    h, d = k_cache.shape[2], k_cache.shape[3]
    n, kv_len = q_span[1] - q_span[0], kv_span[1] - kv_span[0]
    if sliding_window >= kv_len:  # the window reaches the first key: the plain causal mask
        sliding_window = 0  # (a prompt shorter than Gemma 3's local window takes causal_part)
    slots = kv_indices[kv_span[0] + skip : kv_span[1]]
    qi = q[q_span[0] : q_span[1]]
    if not skip and sliding_window <= 0 and causal_part is not None and causal_part(
            qi, k_cache, v_cache, slots, sm_scale, logit_cap, kv_len - n,
            out[q_span[0] : q_span[1]]) is not None:
        return  # the kernel read the pools by slot and wrote the rows in place
    k, v = (rows.transpose(0, 1).unsqueeze(0)
            for rows in _pool_rows(k_cache, v_cache, slots.long()))
    mask = causal_mask(n, kv_len, sliding_window, q.device)[..., skip:]  # [1, 1, n, L - skip]
    if not skip:
        for start in range(0, n, CAUSAL_ROW_BLOCK):
            # queries [start, end) see no key past kv_len - n + end - 1: the keys after it are
            # masked for the whole block, so they are left out instead of computed and masked
            end = min(start + CAUSAL_ROW_BLOCK, n)
            keys = kv_len - n + end
            out[q_span[0] + start : q_span[0] + end] = attend(
                qi[start:end].transpose(0, 1).unsqueeze(0), k[:, :, :keys], v[:, :, :keys],
                mask[:, :, start:end, :keys], sm_scale, logit_cap)[0].transpose(0, 1)
        return
    assert lse is not None
    qg = qi.view(n, h, -1, d)  # [n, Hkv, G, D]: one "batch" entry per query token
    o, o_lse = partial_attention(qg, k, v, mask[0, 0][:, None, None, :], sm_scale, logit_cap)
    out[q_span[0] : q_span[1]] = o.reshape(n, -1, d).to(q.dtype)
    lse[q_span[0] : q_span[1]] = o_lse


def _pool_rows(k_cache: torch.Tensor, v_cache: torch.Tensor, slots: torch.Tensor
               ) -> tuple[torch.Tensor, torch.Tensor]:
    """The key and value rows ``slots`` [L, Hkv, D] of the pools: views when the slots are
    consecutive (a prefill chunk after its own earlier chunks, on a fresh pool: no
    2 x L x Hkv x D copy per layer; checked once for both), else gathers."""
    flat = [c.view(-1, c.shape[2], c.shape[3]) for c in (k_cache, v_cache)]
    if slots.numel():
        start = int(slots[0])
        if torch.equal(slots, torch.arange(start, start + slots.numel(), device=slots.device)):
            return flat[0][start : start + slots.numel()], flat[1][start : start + slots.numel()]
    return flat[0].index_select(0, slots), flat[1].index_select(0, slots)


def _own_keys_batched(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                      kv_indices: torch.Tensor, qo: list[int], kv: list[int],
                      skip: dict[int, int], sm_scale: float, logit_cap: float,
                      out: torch.Tensor, lse: torch.Tensor) -> set[int]:
    """:func:`_own_keys` of every group member at once (one padded attention instead of one
    per request: many short questions after one document); returns the requests done, none
    when padding would more than double the work (then each goes through ``_own_keys``)."""
    reqs = [i for i in sorted(skip) if qo[i + 1] > qo[i]]
    dev = q.device
    n = torch.tensor([qo[i + 1] - qo[i] for i in reqs], device=dev)  # [R] new tokens
    first = torch.tensor([kv[i] + skip[i] for i in reqs], device=dev)  # first own key
    own = torch.tensor([kv[i + 1] - kv[i] - skip[i] for i in reqs], device=dev)  # [R]
    if not reqs:
        return set()
    r, n_max, w = len(reqs), int(n.max()), int(own.max())
    if r * n_max * w > max(2 * int((n * own).sum()), 1 << 16):
        return set()
    h, d = k_cache.shape[2], k_cache.shape[3]
    cols = torch.arange(w, device=dev)
    key_ok = cols[None, :] < own[:, None]  # [R, W]
    slots = kv_indices.long()[(first[:, None] + cols).clamp(max=kv_indices.numel() - 1)]
    slots = slots.masked_fill(~key_ok, 0).reshape(-1)
    k = k_cache.view(-1, h, d).index_select(0, slots).view(r, w, h, d).transpose(1, 2)
    v = v_cache.view(-1, h, d).index_select(0, slots).view(r, w, h, d).transpose(1, 2)
    j = torch.arange(n_max, device=dev)
    q_ok = j[None, :] < n[:, None]  # [R, n_max]
    rows = (torch.tensor([qo[i] for i in reqs], device=dev)[:, None] + j).clamp(
        max=q.shape[0] - 1)
    # query j of request r sits at own-key column own - n + j and sees columns up to it
    mask = (cols[None, None, :] <= (own - n)[:, None, None] + j[None, :, None]) \
        & key_ok[:, None, :] & q_ok[:, :, None]  # [R, n_max, W]
    group = q.shape[1] // h
    mask = mask.repeat_interleave(group, dim=1)[:, None]  # [R, 1, n_max * G, W]
    qg = q[rows].view(r, n_max, h, group, d).permute(0, 2, 1, 3, 4).reshape(r, h, -1, d)
    o, o_lse = partial_attention(qg, k, v, mask, sm_scale, logit_cap)  # [R, Hkv, n_max*G, *]
    o = o.view(r, h, n_max, group, d).permute(0, 2, 1, 3, 4)[q_ok]  # [T_own, Hkv, G, D]
    o_lse = o_lse.view(r, h, n_max, group, 1).permute(0, 2, 1, 3, 4)[q_ok]
    done = rows[q_ok]
    out[done] = o.reshape(-1, q.shape[1], d).to(q.dtype)
    lse[done] = o_lse
    return set(reqs)


def _shared_keys(q: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                 qo: list[int], g: CascadeGroup, sm_scale: float, logit_cap: float,
                 out: torch.Tensor, lse: torch.Tensor) -> None:
    """All members' queries against the group's shared prefix (no mask: it precedes them)."""
    h, d = k_cache.shape[2], k_cache.shape[3]
    kp, vp = (rows.transpose(0, 1)[None] for rows in _pool_rows(k_cache, v_cache, g.prefix))
    # kp, vp: [1, Hkv, Lp, D]
    rows = torch.cat([torch.arange(qo[m], qo[m + 1]) for m in g.members.tolist()])
    per_chunk = max(GROUP_SCORE_BUDGET // max(g.prefix.numel() * q.shape[1], 1), 1)
    for chunk in rows.split(per_chunk):
        t = chunk.numel()
        qg = q[chunk].view(t, h, -1, d).permute(1, 0, 2, 3).reshape(1, h, -1, d)
        o_p, l_p = partial_attention(qg, kp, vp, None, sm_scale, logit_cap)
        o_p = o_p.view(h, t, -1, d).permute(1, 0, 2, 3)  # [t, Hkv, G, D]
        l_p = l_p.view(h, t, -1, 1).permute(1, 0, 2, 3)
        o_s = out[chunk].view(t, h, -1, d).float()
        out[chunk] = merge_partial(o_s, lse[chunk], o_p, l_p).reshape(t, -1, d).to(q.dtype)
