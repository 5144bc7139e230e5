"""``select``: score every choice from prompt logprobs, with exact token boundaries.

Tokenizing ``prefix + choice`` can merge the prefix's last characters into the choice's first
token (``"is " + "Paris"`` -> ``"is", " Paris"``). The choice's tokens are therefore found by
comparing token ids, never text: they start where the ids of ``prefix + choice`` first differ
from the ids of ``prefix``. The merged token is scored as part of the choice, and each
choice's span is returned explicitly (``choice_token_spans``) (cf. sglang #608, #1257, #2873).

With the tokenizer at hand this is one batched prefill-only request: every ``prefix + choice``
as input ids, scored from its own boundary (plus, when the method needs them, the choice
tokens alone for unconditional logprobs). Without one (a remote server), the prefix is
prefilled first to learn its length, and the batch also carries the prefix, scored over the
same window, so the ids can be compared; the window widens if a merge reaches further back.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..choices import ChoicesDecision, ChoicesSamplingMethod, mean_logprob

if TYPE_CHECKING:
    from ..interpreter import StreamExecutor


class ScoringBackend(Protocol):
    """What choice scoring needs of a native backend (``native.NativeBackend`` is one)."""

    def send(self, body: dict[str, Any]) -> Any: ...

    def prefill(self, text: str, rid: str | None = None) -> dict[str, Any]: ...

    def select_tokenizer(self) -> Any | None: ...

FIRST_WINDOW = 8  # prefix tokens scored alongside the choices when no tokenizer is at hand
_SCORE_PARAMS = {"max_new_tokens": 0, "temperature": 0}


@dataclass
class ScoredChoice:
    entries: list[list[Any]]  # (logprob, token_id, text) of the choice's own tokens
    span: tuple[int, int]  # token positions [start, end) in the prefix + choice sequence
    meta: dict[str, Any]
    unconditional: list[list[Any]] | None = None


def common_prefix_len(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def choice_start(prefix_ids: Sequence[int], full_ids: Sequence[int]) -> int:
    """First token position of the choice in ``full_ids`` (``prefix + choice``): where it
    stops agreeing with ``prefix_ids``; a choice always owns at least its last token."""
    return min(common_prefix_len(prefix_ids, full_ids), len(full_ids) - 1)


def _score_request(ids: list[list[int]], starts: list[int], rids: list[str]
                   ) -> dict[str, Any]:
    return {"input_ids": ids, "sampling_params": dict(_SCORE_PARAMS), "return_logprob": True,
            "return_text_in_logprobs": True, "logprob_start_len": starts, "rid": rids}


def _check_ids(entries: list[list[Any]], expected: Sequence[int], choice: str) -> None:
    got = [e[1] for e in entries]
    if got != list(expected):
        raise RuntimeError(f"select: the server scored tokens {got} for choice {choice!r}, "
                           f"expected {list(expected)}")


def _with_tokenizer(backend: ScoringBackend, s: StreamExecutor, tok: Any, choices: list[str],
                    unconditional: bool) -> list[ScoredChoice]:
    prefix_ids = tok(s.text_).input_ids
    full = [tok(s.text_ + c).input_ids for c in choices]
    starts = [choice_start(prefix_ids, f) for f in full]
    ids, lsl = list(full), list(starts)
    if unconditional:
        ids += [f[b:] for f, b in zip(full, starts)]
        lsl += [0] * len(choices)
    rids = [s.new_rid() for _ in ids]
    with s.requests_in_flight(rids):
        out = backend.send(_score_request(ids, lsl, rids))
    scored = []
    for i, (c, f, b) in enumerate(zip(choices, full, starts)):
        meta = out[i]["meta_info"]
        entries = meta["input_token_logprobs"]
        _check_ids(entries, f[b:], c)
        uncond = out[len(choices) + i]["meta_info"]["input_token_logprobs"] if unconditional \
            else None
        scored.append(ScoredChoice(entries, (b, len(f)), meta, uncond))
    return scored


def _windowed(backend: ScoringBackend, s: StreamExecutor, choices: list[str],
              unconditional: bool) -> list[ScoredChoice]:
    prefix = s.text_
    rid = s.new_rid()
    with s.requests_in_flight([rid]):
        head = backend.prefill(prefix, rid)
    s.record_usage("prefill", head["meta_info"])
    prefix_len = head["meta_info"]["prompt_tokens"]
    found: dict[int, ScoredChoice] = {}
    window = FIRST_WINDOW
    while len(found) < len(choices):
        start = max(prefix_len - window, 0)
        todo = [i for i in range(len(choices)) if i not in found]
        texts = [prefix] + [prefix + choices[i] for i in todo]
        rids = [s.new_rid() for _ in texts]
        body = {"text": texts, "sampling_params": dict(_SCORE_PARAMS), "return_logprob": True,
                "return_text_in_logprobs": True, "logprob_start_len": start, "rid": rids}
        with s.requests_in_flight(rids):
            out = backend.send(body)
        tail = [e[1] for e in out[0]["meta_info"]["input_token_logprobs"]]
        for i, item in zip(todo, out[1:]):
            entries = item["meta_info"]["input_token_logprobs"]
            ids = [e[1] for e in entries]
            b = choice_start(tail, ids)
            if b == 0 and start > 0:
                continue  # the merge may reach before the window: widen it
            found[i] = ScoredChoice(entries[b:], (start + b, start + len(ids)),
                                    item["meta_info"])
        window *= 4
    scored = [found[i] for i in range(len(choices))]
    if unconditional:
        rids = [s.new_rid() for _ in scored]
        body = {"input_ids": [[e[1] for e in sc.entries] for sc in scored],
                "sampling_params": {"max_new_tokens": 0}, "return_logprob": True,
                "logprob_start_len": 0, "rid": rids}
        with s.requests_in_flight(rids):
            out = backend.send(body)
        for sc, item in zip(scored, out):
            sc.unconditional = item["meta_info"]["input_token_logprobs"]
    return scored


def score_choices(backend: ScoringBackend, s: StreamExecutor, choices: list[str],
                  method: ChoicesSamplingMethod) -> ChoicesDecision:
    """Score ``choices`` after ``s.text_`` and let ``method`` decide."""
    need_uncond = method.requires_unconditional_logprobs
    tok = backend.select_tokenizer()
    scored = _with_tokenizer(backend, s, tok, choices, need_uncond) if tok is not None \
        else _windowed(backend, s, choices, need_uncond)
    for sc in scored:
        s.record_usage("select", sc.meta)
    decision = method(
        choices=choices,
        normalized_prompt_logprobs=[mean_logprob(sc.entries) for sc in scored],
        input_token_logprobs=[sc.entries for sc in scored],
        output_token_logprobs=[sc.meta.get("output_token_logprobs", []) for sc in scored],
        unconditional_token_logprobs=[sc.unconditional for sc in scored] if need_uncond
        else None)
    prompt = [int(sc.meta.get("prompt_tokens") or 0) for sc in scored]
    cached = [int(sc.meta.get("cached_tokens") or 0) for sc in scored]
    decision.meta_info.update(
        choice_token_spans=[list(sc.span) for sc in scored], choice_prompt_tokens=prompt,
        choice_cached_tokens=cached, prompt_tokens=sum(prompt), cached_tokens=sum(cached))
    return decision
