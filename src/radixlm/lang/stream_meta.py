"""Logprob meta info of streamed gens: the server sends each chunk's new output logprobs only
(SGLang's streaming contract); the program state keeps them whole, and a reader of the stream
gets, with each piece of text, the logprobs that arrived since its previous piece."""

from __future__ import annotations

from typing import Any

# meta_info keys whose streamed values are per-chunk increments
INCREMENTAL_KEYS = ("output_token_logprobs", "output_top_logprobs")


def merge_chunk(whole: dict[str, Any] | None, chunk: dict[str, Any]) -> dict[str, Any]:
    """``whole`` (everything so far, or None) extended by one stream chunk's meta info; a new
    dict, so a reader in another thread never sees a half-updated one."""
    merged = dict(chunk)
    if whole is not None:
        for key in INCREMENTAL_KEYS:
            if key in chunk or key in whole:
                merged[key] = list(whole.get(key, [])) + list(chunk.get(key, []))
    return merged


def since(whole: dict[str, Any] | None, counts: dict[str, int]) -> dict[str, Any] | None:
    """The view of ``whole`` for a stream reader: incremental keys hold only the entries after
    those already given (``counts``, updated in place)."""
    if whole is None:
        return None
    view = dict(whole)
    for key in INCREMENTAL_KEYS:
        if key in whole:
            view[key] = whole[key][counts.get(key, 0):]
            counts[key] = len(whole[key])
    return view
