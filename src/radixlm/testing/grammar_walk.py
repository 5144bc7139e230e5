"""Random-logit walks through a compiled grammar (a test helper: the generation tests use it).

The adversary samples from ``torch.randn`` logits after the bitmask is applied (the kernel the
runtime uses), optionally with jump-forward; after ``close_after`` tokens it heads for the
nearest end, so every walk over a grammar with an end finishes within ``max_steps``.
"""

from __future__ import annotations

import torch

from radixlm.fsm import jump_forward
from radixlm.fsm.automaton.lazy_dfa import shortest_completion
from radixlm.kernels import apply_token_bitmask_ref

MAX_STEPS = 2000
CLOSE_AFTER = 400  # then the sampler heads for the nearest end (patterns can be unbounded)


def random_walk(grammar, tokenizer, vocab, gen: torch.Generator, jump: bool = False,  # noqa: ANN001
                close_after: int = CLOSE_AFTER, prefix: str = "") -> tuple[str, int]:
    """One sampled output (decoded), and how many of its tokens were forced; ``prefix`` is
    accepted first (it must be allowed) and is part of the output."""
    matcher, out, forced = grammar.new_matcher(), [], 0
    for token in tokenizer.encode(prefix, add_special_tokens=False) if prefix else []:
        assert matcher.accept_token(token), f"prefix {prefix!r} is not allowed"
        out.append(token)
    mask = torch.zeros(1, vocab.num_words, dtype=torch.int32)
    encode = lambda text: tokenizer.encode(text, add_special_tokens=False)  # noqa: E731
    for _ in range(MAX_STEPS):
        plan = jump_forward(matcher, out, encode, tokenizer.decode,
                            extendable=lambda t: bool(vocab.extendable[t])) if jump else None
        if plan is not None:
            out = out[: len(out) - plan.rollback] + list(plan.tokens)
            forced += len(plan.tokens)
            continue
        matcher.fill_bitmask(mask[0])
        logits = torch.randn(1, vocab.vocab_size, generator=gen)
        if len(out) > close_after:
            logits[0, _closing_tokens(grammar, matcher, vocab)] += 50.0
        apply_token_bitmask_ref(logits, mask)
        token = int(logits.argmax())  # random logits: every allowed token equally likely
        assert matcher.accept_token(token), f"sampled a masked-out token {token}"
        if matcher.is_finished():
            return tokenizer.decode(out), forced
        out.append(token)
    raise AssertionError(f"no end after {MAX_STEPS} steps: {tokenizer.decode(out)[:300]!r}")


def _closing_tokens(grammar, matcher, vocab) -> list[int]:  # noqa: ANN001
    """EOS and the tokens that spell a prefix of the shortest way to an end."""
    ids = getattr(vocab, "_test_ids_by_bytes", None)
    if ids is None:
        ids = {}
        for tid, data in enumerate(vocab.token_bytes):
            if data:
                ids.setdefault(data, []).append(tid)
        vocab._test_ids_by_bytes = ids
    rest = shortest_completion(grammar.dfa, matcher.state) or b""
    out = list(vocab.eos_token_ids)
    for n in range(1, min(len(rest), vocab.max_token_len) + 1):
        out += ids.get(rest[:n], [])
    return out
