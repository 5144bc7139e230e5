"""What a scheduler reports in ``/get_server_info``: its counters and queue lengths, merged
with the statistics of the parts that own them (output processor, KV manager, grammar side).

Pure: each part's numbers come in as they are; later sections win on a shared key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def server_info(counters: Mapping[str, int], sections: Iterable[Mapping[str, Any]],
                waiting: int, running: int, max_context: int, vocab_size: int
                ) -> dict[str, Any]:
    """The scheduler's ``counters``, then each of ``sections``, then the queue lengths, the
    share of prompt tokens served from the prefix cache, and the model's limits."""
    info: dict[str, Any] = dict(counters)
    for section in sections:
        info.update(section)
    prompt = counters["prompt_tokens"]
    info.update(waiting=waiting, running=running,
                cache_hit_rate=counters["cached_tokens"] / prompt if prompt else 0.0,
                max_context=max_context, vocab_size=vocab_size)
    return info
