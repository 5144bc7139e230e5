"""Jump-forward: append the text a grammar forces without sampling it token by token.

Given a request's output ids and the forced string, the last few output tokens and the string
are retokenized together (so the result is the canonical tokenization across the boundary,
not the forced string tokenized alone), trailing tokens that a longer vocabulary token could
still extend are held back for the model to produce (token healing), and the plan says how many
output tokens to drop and which to append. The plan keeps the text exact: the new ids decode to
the old text plus a prefix of the forced string, or there is no plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .radix_cache import common_prefix_len

RETOKENIZE_WINDOW = 4  # output tokens re-encoded with the forced text
MAX_HOLD_BACK = 2  # trailing tokens at most held back


@dataclass(frozen=True)
class JumpPlan:
    rollback: int  # trailing output tokens replaced
    tokens: list[int]  # tokens appended in their place (forced ones included)


class JumpForwardPlanner:
    """Plans jumps for one tokenizer; ``token_bytes[i]`` is token i's bytes (None: special)."""

    def __init__(self, tokenizer: Any, token_bytes: Sequence[bytes | None]) -> None:
        self.tokenizer = tokenizer
        self.token_bytes = token_bytes
        # Byte strings that are a proper prefix of some token: a forced tail token whose bytes
        # are in here might merge with what the model writes next.
        self.extendable: set[bytes] = set()
        for b in token_bytes:
            if b:
                self.extendable.update(b[:i] for i in range(1, len(b)))

    def _text(self, ids: Sequence[int]) -> bytes:
        parts = [self.token_bytes[i] if i < len(self.token_bytes) else None for i in ids]
        if any(p is None for p in parts):
            raise ValueError("special or unknown token in a constrained output")
        return b"".join(parts)  # type: ignore[arg-type]

    def plan(self, output_ids: Sequence[int], forced: str, window_limit: int) -> JumpPlan | None:
        """The jump for ``output_ids`` followed by ``forced``; None when nothing would be
        gained or the retokenization does not reproduce the text exactly.

        ``window_limit`` caps how many trailing output tokens may be re-encoded (the tokens
        since the constraint started).
        """
        k = min(RETOKENIZE_WINDOW, window_limit, len(output_ids))
        tail = list(output_ids[len(output_ids) - k:])
        try:
            tail_bytes = self._text(tail)
        except ValueError:
            return None
        target = tail_bytes + forced.encode("utf-8")
        try:
            text = target.decode("utf-8")
        except UnicodeDecodeError:
            return None
        new = self.tokenizer.encode(text, add_special_tokens=False)
        try:
            if self._text(new) != target:
                return None
        except ValueError:
            return None
        for _ in range(MAX_HOLD_BACK):
            if new and self.token_bytes[new[-1]] in self.extendable:
                new.pop()
        if len(self._text(new)) <= len(tail_bytes):
            return None  # holding back left nothing beyond what was already written
        common = common_prefix_len(tail, new)
        return JumpPlan(rollback=k - common, tokens=new[common:])
