"""What the prefetch and urgent-work tests share: a compile budget with no warm-up (every mask
cold unless prefetched), a small schema of bounded strings, and a token looked up by its
bytes."""

from __future__ import annotations

from radixlm.fsm import CompileBudget

# No compile-time or background warm-up: every mask is cold unless prefetched.
COLD = CompileBudget(warmup_states=0, background_warmup_states=0)
SCHEMA = {"type": "object", "properties": {k: {"type": "string", "maxLength": 12}
                                           for k in ("alpha", "beta", "gamma")},
          "required": ["alpha", "beta", "gamma"], "additionalProperties": False}


def token_of(vocab, text: bytes) -> int:  # noqa: ANN001
    """The id of the token whose bytes are ``text``."""
    return next(t for t, b in enumerate(vocab.token_bytes) if b == text)
