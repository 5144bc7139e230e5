"""The routing key of an HTTP request body: what the HTTP router's prefix tree matches on.

The router holds no tokenizer (it fronts workers it knows only by URL), so a text prompt is
keyed by its UTF-8 bytes (0..255) and a token-id prompt by its ids shifted past them
(``256 + id``), so the two never collide. A prefix shared in text is a prefix shared in bytes,
which is what the cache-aware policy needs. A chat request is keyed by its messages in order
(role, then content), so conversations sharing a system prompt or a document share a prefix.
A batch goes to one worker, keyed by its first prompt.
"""

from __future__ import annotations

import json
from typing import Any

ID_OFFSET = 256


def _text_key(text: str) -> list[int]:
    return list(text.encode("utf-8", "surrogatepass"))


def _prompt_key(prompt: Any) -> list[int]:
    if isinstance(prompt, str):
        return _text_key(prompt)
    if isinstance(prompt, list) and prompt:
        if all(isinstance(t, int) for t in prompt):
            return [ID_OFFSET + t for t in prompt]
        return _prompt_key(prompt[0])  # a batch: its first prompt
    return []


def _chat_key(messages: Any) -> list[int]:
    if not isinstance(messages, list):
        return []
    key: list[int] = []
    for m in messages:
        if not isinstance(m, dict):
            return key
        content = m.get("content")
        text = content if isinstance(content, str) else json.dumps(content, sort_keys=True)
        key += _text_key(f"{m.get('role')}\n{text}\n")
    return key


def routing_key(path: str, body: Any) -> list[int]:
    """The key for ``body`` sent to ``path`` (empty when the body has no prompt: the worker
    then answers its own validation error)."""
    if not isinstance(body, dict):
        return []
    if path == "/v1/chat/completions":
        return _chat_key(body.get("messages"))
    if path == "/v1/completions":
        return _prompt_key(body.get("prompt"))
    if body.get("input_ids") is not None:
        return _prompt_key(body["input_ids"])
    return _prompt_key(body.get("text"))
