"""Pieces shared by the decode and extend attention references.

KV for a batch is described FlashInfer-style: request ``i`` reads the pool slots
``kv_indices[kv_indptr[i] : kv_indptr[i + 1]]`` in sequence order (its prefix, then its new
tokens, which were stored before attention runs).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from .checks import FLOAT_DTYPES, INDEX_DTYPES, check_dim, check_tensor
from .kv_store import check_kv_cache


def check_attention_args(
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    kv_indptr: torch.Tensor,
    kv_indices: torch.Tensor,
) -> None:
    """q [*, Hq, D]; caches [pages, page_size, Hkv, D]; Hq a multiple of Hkv."""
    check_tensor("q", q, ndim=3, dtypes=FLOAT_DTYPES)
    check_kv_cache("k_cache", k_cache)
    check_kv_cache("v_cache", v_cache)
    if v_cache.shape != k_cache.shape:
        raise ValueError("v_cache: expected the same shape as k_cache")
    for name, cache in (("k_cache", k_cache), ("v_cache", v_cache)):
        if cache.dtype != q.dtype or cache.device != q.device:
            raise TypeError(f"{name}: expected dtype {q.dtype} on {q.device}, got "
                            f"{cache.dtype} on {cache.device}")
    check_dim("k_cache", k_cache, 3, q.shape[2])
    if q.shape[1] % k_cache.shape[2]:
        raise ValueError(
            f"q: num_heads {q.shape[1]} must be a multiple of num_kv_heads {k_cache.shape[2]}"
        )
    check_tensor("kv_indptr", kv_indptr, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    check_tensor("kv_indices", kv_indices, ndim=1, dtypes=INDEX_DTYPES, device=q.device)
    if kv_indptr.shape[0] < 1:
        raise ValueError("kv_indptr: expected at least one element")


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    mask: torch.Tensor | None,
    sm_scale: float,
    logit_cap: float,
) -> torch.Tensor:
    """Softmax attention with grouped KV heads.

    q [B, Hq, Lq, D]; k, v [B, Hkv, Lk, D]; mask [B, 1, Lq, Lk] bool (True = attend), or None
    when every key is attended.
    Query head ``h`` reads KV head ``h // (Hq // Hkv)``, as in Hugging Face.
    """
    if logit_cap <= 0:
        return F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, scale=sm_scale, enable_gqa=k.shape[1] != q.shape[1]
        )
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)) * sm_scale
    scores = logit_cap * torch.tanh(scores / logit_cap)
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))
    probs = torch.softmax(scores, dim=-1)
    return torch.matmul(probs, v.float()).to(q.dtype)


CASCADE_MIN_PREFIX = 64  # shorter shared prefixes are not worth a separate pass
CASCADE_MIN_GROUP = 2


@dataclass(frozen=True)
class CascadeGroup:
    """Requests ``members`` share the KV slots ``prefix`` (their first ``len(prefix)``)."""

    members: torch.Tensor  # [g] request indices
    prefix: torch.Tensor  # [Lp] pool slots


def shared_prefix_groups(
    slots: torch.Tensor, lens: torch.Tensor, limit: torch.Tensor
) -> list[CascadeGroup]:
    """Requests that share a prefix of the same pool slots, for cascade attention.

    slots [B, L] padded, lens [B]; ``limit[b]`` caps how much of request b may count as
    shared (its new tokens never do). Greedy: each ungrouped request leads a group of those
    sharing >= 64 slots with it, cut at the length that saves the most reads
    ((members - 1) x length).
    """
    batch = slots.shape[0]
    if batch < CASCADE_MIN_GROUP or int(lens.max()) <= CASCADE_MIN_PREFIX:
        return []
    width = int(lens.max())
    pos = torch.arange(width, device=slots.device)
    valid = pos[None, :] < lens[:, None]
    free = torch.ones(batch, dtype=torch.bool, device=slots.device)
    groups = []
    # Only requests whose first slot is shared with another can lead a group.
    firsts, counts = torch.unique(slots[:, 0], return_counts=True)
    shared_firsts = set(firsts[counts >= CASCADE_MIN_GROUP].tolist())
    for leader in range(batch):
        if not shared_firsts or not free[leader] or int(slots[leader, 0]) not in shared_firsts:
            continue
        same = (slots[:, :width] == slots[leader, :width]) & valid & valid[leader]
        common = same.long().cumprod(dim=1).sum(dim=1)  # [B] common prefix with the leader
        common = torch.minimum(common, limit)
        candidates = torch.where(free, common, torch.zeros_like(common))
        ranked = candidates.sort(descending=True).values  # ranked[k]: k+1 members share it
        saving = ranked[1:] * torch.arange(1, batch, device=slots.device)
        best = int(saving.argmax()) + 1 if batch > 1 else 0
        shared = int(ranked[best])
        if shared < CASCADE_MIN_PREFIX:
            continue
        members = torch.nonzero(candidates >= shared).flatten()
        groups.append(CascadeGroup(members, slots[leader, :shared].clone()))
        free[members] = False
    return groups


def partial_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None,
             sm_scale: float, logit_cap: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Unnormalized attention with its log-sum-exp.

    q [N, Hkv, G, D]; k, v [N, Hkv, L, D] (N = 1 broadcasts); mask [N, 1, 1, L] or None.
    Returns (out [N, Hkv, G, D] normalized over this part, lse [N, Hkv, G, 1]); a row with no
    visible key has out 0 and lse -inf (zero weight in :func:`merge_partial`).

    On CPU in float32 without a logit cap this is torch's fused flash kernel (blocked: the
    [G, L] scores never materialize, no separate softmax passes), equal to
    :func:`partial_attention_matmul` within float32 rounding; otherwise that reference.
    """
    if not fused_applies(q, k, logit_cap):
        return partial_attention_matmul(q, k, v, mask, sm_scale, logit_cap)
    n = q.shape[0]
    if k.shape[0] != n:  # the kernel takes no broadcast batch: stride-0 views, no copy
        k, v = k.expand(n, -1, -1, -1), v.expand(n, -1, -1, -1)
    bias = None
    if mask is not None:
        bias = torch.zeros(mask.shape, dtype=q.dtype, device=q.device)
        bias.masked_fill_(~mask, float("-inf"))
    out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        q, k, v, attn_mask=bias, scale=sm_scale)
    lse = lse.unsqueeze(-1)
    if mask is not None:  # the kernel leaves lse 0 on a row that sees no key
        lse.masked_fill_(~mask.any(dim=-1, keepdim=True), float("-inf"))
    return out, lse


def fused_applies(q: torch.Tensor, k: torch.Tensor, logit_cap: float) -> bool:
    """Whether :func:`partial_attention` runs torch's fused CPU kernel for these inputs."""
    return (logit_cap <= 0 and q.device.type == "cpu" and q.dtype == torch.float32
            and k.dtype == torch.float32)


def partial_attention_matmul(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                             mask: torch.Tensor | None, sm_scale: float, logit_cap: float
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`partial_attention` by explicit scores and softmax (the reference; any dtype,
    device and logit cap)."""
    scores = torch.matmul(q.float(), k.float().transpose(-1, -2)).mul_(sm_scale)
    if logit_cap > 0:
        scores = logit_cap * torch.tanh(scores / logit_cap)
    if mask is not None:
        scores.masked_fill_(~mask, float("-inf"))
    peak = scores.amax(dim=-1, keepdim=True)
    peak = peak.masked_fill(torch.isinf(peak), 0.0)  # rows with no key stay at zero weight
    probs = scores.sub_(peak).exp_()  # in place: one pass, no second buffer
    total = probs.sum(dim=-1, keepdim=True)
    out = torch.matmul(probs, v.float()).div_(total.clamp(min=1e-30))
    return out, peak + total.log()


def merge_partial(
    o1: torch.Tensor, l1: torch.Tensor, o2: torch.Tensor, l2: torch.Tensor
) -> torch.Tensor:
    """Combine two normalized partial attentions over disjoint key sets by their LSEs."""
    total = torch.logaddexp(l1, l2)
    return o1 * torch.exp(l1 - total) + o2 * torch.exp(l2 - total)
