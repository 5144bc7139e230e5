"""Which waiting requests to admit first.

``fcfs`` keeps arrival order. ``lpm`` puts the longest cached prefix first (the SGLang paper's
cache-aware order, which approximates a depth-first walk of the radix tree), but a request
passed over ``lpm_max_wait_steps`` times goes to the front in arrival order, so one that hits
nothing cannot starve. Like SGLang, lpm falls back to fcfs beyond 128 waiting requests (the
matching cost grows with the queue) and when the cache is disabled.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..memory.radix_cache import common_prefix_len

if TYPE_CHECKING:
    from ..memory.kv_manager import KVManager
    from ..server_args import ServerArgs
    from .request import Req

LPM_MAX_QUEUE = 128
DEDUP_MIN_TOKENS = 32


def order_waiting(waiting: Sequence[Req], kv: KVManager, args: ServerArgs) -> list[Req]:
    """The waiting requests in the order the scheduler should try to admit them."""
    if args.schedule_policy == "fcfs" or kv.cache is None or len(waiting) > LPM_MAX_QUEUE:
        return list(waiting)
    aged = [r for r in waiting if r.wait_steps >= args.lpm_max_wait_steps]
    rest = [r for r in waiting if r.wait_steps < args.lpm_max_wait_steps]
    hits = {id(r): kv.cached_prefix_len(r.token_ids[: r.max_reuse], r.namespace) for r in rest}
    return aged + sorted(rest, key=lambda r: -hits[id(r)])


def uncached_shared_len(req: Req, scheduled: Sequence[Req], kv: KVManager) -> int:
    """The most not-yet-cached prefix tokens ``req`` shares with a request already scheduled
    in this step (what admitting ``req`` now would compute a second time); 0 without a cache."""
    if kv.cache is None or not scheduled:
        return 0
    tokens = req.token_ids[: req.max_reuse]
    cached = None
    best = 0
    for other in scheduled:
        if other.namespace != req.namespace or not other.token_ids or not tokens or \
                other.token_ids[0] != tokens[0]:
            continue
        common = common_prefix_len(tokens, other.token_ids)
        if cached is None:
            cached = kv.cached_prefix_len(tokens, req.namespace)
        best = max(best, common - cached)
    return best


def waits_for_cache(shared: int, duplicated: int) -> bool:
    """Whether a request sharing ``shared`` uncached tokens with this step's requests waits a
    step to reuse them from the cache, when the requests already admitted in this step
    recompute ``duplicated`` shared tokens: the step may duplicate fewer than
    ``DEDUP_MIN_TOKENS`` tokens in all. (Counting them per request instead let 15 requests
    each recompute the 16-token tail of a shared document the first had not finished.)"""
    return shared > 0 and duplicated + shared >= DEDUP_MIN_TOKENS


def shares_uncached_prefix(req: Req, scheduled: Sequence[Req], kv: KVManager,
                           duplicated: int = 0) -> bool:
    """True if ``req`` should wait a step (see :func:`waits_for_cache`): waiting lets it
    reuse the prefix it shares with a request already scheduled in this step."""
    return waits_for_cache(uncached_shared_len(req, scheduled, kv), duplicated)
