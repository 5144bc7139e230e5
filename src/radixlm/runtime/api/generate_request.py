"""A generate call (SGLang's native ``/generate`` body or ``Engine.generate`` arguments),
validated and expanded into one item per sequence.

``text`` or ``input_ids`` (exactly one), each single or a batch; ``sampling_params`` one dict
for all or one per item; ``n > 1`` expands each item into ``n`` sequences. Errors name the
field and what was wrong.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from ..wire.messages import GrammarReq
from ..wire.sampling_params import SamplingParams, SamplingParamsError, parse_sampling_params

# SGLang 0.5.23's GenerateReqInput, field by field. Routing, tracing and logging fields are
# accepted and have no effect on a single-process server; features this runtime lacks are
# refused by name when a request actually asks for them (a non-default value).
SERVED_FIELDS = {
    "text", "input_ids", "sampling_params", "rid", "return_logprob", "logprob_start_len",
    "top_logprobs_num", "return_text_in_logprobs", "stream", "cache_salt", "extra_key",
}
IGNORED_FIELDS = {
    "log_metrics", "modalities", "priority", "bootstrap_host", "bootstrap_port",
    "bootstrap_room", "bootstrap_pair_key", "decode_tp_size", "routed_dp_rank",
    "data_parallel_rank", "disagg_prefill_dp_rank", "routing_key", "conversation_id",
    "http_worker_ipc", "no_logs", "custom_labels", "external_trace_header", "received_time",
    "need_wait_for_mm_inputs", "num_items_assigned",
}
UNSUPPORTED = {
    "image_data": "images (this runtime serves text-only models)",
    "video_data": "videos (text-only models)", "audio_data": "audio (text-only models)",
    "mm_hashes": "multimodal inputs", "mm_content_hashes": "multimodal inputs",
    "use_audio_in_video": "multimodal inputs", "video_config": "multimodal inputs",
    "encoder_urls": "remote encoders", "max_dynamic_patch": "multimodal inputs",
    "min_dynamic_patch": "multimodal inputs", "image_max_dynamic_patch": "multimodal inputs",
    "video_max_dynamic_patch": "multimodal inputs", "images_config": "multimodal inputs",
    "mm_processor_kwargs": "multimodal inputs", "input_embeds": "input_embeds",
    "lora_path": "LoRA adapters", "lora_id": "LoRA adapters",
    "custom_logit_processor": "custom logit processors",
    "return_hidden_states": "hidden states", "return_routed_experts": "routed experts",
    "routed_experts_start_len": "routed experts", "return_indexer_topk": "indexer top-k",
    "session_id": "sessions", "session_params": "sessions",
    "token_ids_logprob": "token_ids_logprob", "return_sampling_mask": "sampling masks",
    "sampling_logprobs_mode": "sampling logprob modes",
    "return_flat_raw_top_logprobs": "flat raw top logprobs",
    "return_flat_raw_output_top_logprobs": "flat raw top logprobs",
    "return_flat_raw_top_logprobs_b64": "flat raw top logprobs",
    "positional_embed_overrides": "positional embedding overrides",
    "background": "background requests", "require_reasoning": "reasoning controls",
    "max_thinking_tokens": "reasoning controls", "return_bytes": "byte outputs",
    "return_entropy": "entropy outputs", "return_prompt_token_ids": "prompt token id echo",
    "watermark": "watermarks", "multi_item_delimiter_indices": "multi-item scoring",
    "token_indices_to_pool": "pooling", "kv_hints": "KV hints",
}
KNOWN_FIELDS = SERVED_FIELDS | IGNORED_FIELDS | set(UNSUPPORTED)


# A vocabulary's worth is the engine's own bound (checked against the model at the API); this
# one only keeps the number on the 64-bit wire.
MAX_TOP_LOGPROBS_NUM = 2**31 - 1
MAX_TOKENS_ANY = 2**31 - 1


class RequestValidationError(ValueError):
    """The request body is malformed; the message names the field."""


@dataclass(frozen=True)
class GenerateItem:
    """One sequence to generate."""

    rid: str
    index: int  # position in the flattened output list
    text: str | None
    input_ids: list[int] | None
    sampling: SamplingParams
    return_logprob: bool
    logprob_start_len: int
    top_logprobs_num: int
    return_text_in_logprobs: bool
    cache_salt: str
    grammar_after: str | None = None  # the constraint starts after this output text
    group_rid: str = ""  # the rid the caller gave: one per prompt, shared by its n sequences
    explicit_max_new_tokens: bool = False  # asked for (checked against the context), or default

    @property
    def grammar(self) -> GrammarReq | None:
        p = self.sampling
        if not p.has_grammar:
            return None
        return GrammarReq(json_schema=p.json_schema, regex=p.regex, choices=p.choices,
                          json_object=p.json_object, ebnf=p.ebnf,
                          structural_tag=p.structural_tag, start_after=self.grammar_after)


@dataclass(frozen=True)
class GenerateRequest:
    items: list[GenerateItem]
    is_batch: bool  # the caller expects a list back
    stream: bool


def _per_item(value: Any, n: int, name: str) -> list[Any]:
    if isinstance(value, list):
        if len(value) != n:
            raise RequestValidationError(f"{name}: expected {n} values (one per prompt), "
                                         f"got {len(value)}")
        return value
    return [value] * n


def _check_type(name: str, value: Any, types: tuple[type, ...]) -> None:
    if value is not None and not isinstance(value, types):
        raise RequestValidationError(
            f"{name}: expected {' or '.join(t.__name__ for t in types)}, "
            f"got {type(value).__name__}")


def _prompts(body: dict[str, Any]) -> tuple[list[str | None], list[list[int] | None], bool]:
    text, ids = body.get("text"), body.get("input_ids")
    if (text is None) == (ids is None):
        raise RequestValidationError("exactly one of 'text' or 'input_ids' must be given")
    if text is not None:
        if isinstance(text, str):
            return [text], [None], False
        if isinstance(text, list) and text and all(isinstance(t, str) for t in text):
            return list(text), [None] * len(text), True
        raise RequestValidationError("text: expected a string or a non-empty list of strings")
    if isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        return [None], [list(ids)], False
    if isinstance(ids, list) and ids and all(
            isinstance(s, list) and all(isinstance(t, int) for t in s) for s in ids):
        return [None] * len(ids), [list(s) for s in ids], True
    raise RequestValidationError(
        "input_ids: expected a list of ints or a non-empty list of lists of ints")


def _gives_max_new_tokens(raw: Any) -> bool:
    return isinstance(raw, dict) and any(raw.get(k) is not None
                                         for k in ("max_new_tokens", "max_tokens"))


def _namespace(cache_salt: str, extra_key: str) -> str:
    return f"{cache_salt}\x00{extra_key}" if extra_key else cache_salt


def parse_generate_request(body: dict[str, Any]) -> GenerateRequest:
    """Validate a native ``/generate`` body (or Engine.generate arguments)."""
    if not isinstance(body, dict):
        raise RequestValidationError(f"request body must be a JSON object, got "
                                     f"{type(body).__name__}")
    unknown = sorted(set(body) - KNOWN_FIELDS)
    if unknown:
        raise RequestValidationError(f"unknown field(s) {unknown}")
    for name, what in UNSUPPORTED.items():
        if body.get(name):
            raise RequestValidationError(f"{name}: {what} are not supported by radixlm; "
                                         f"leave it unset")
    texts, ids, is_batch = _prompts(body)
    n_prompts = len(texts)
    _check_type("stream", body.get("stream"), (bool,))
    raw_params = _per_item(body.get("sampling_params"), n_prompts, "sampling_params")
    try:
        params = [parse_sampling_params(p) for p in raw_params]
    except SamplingParamsError as exc:
        raise RequestValidationError(str(exc)) from None
    fields = {}
    for name, types, default in (("return_logprob", (bool,), False),
                                 ("logprob_start_len", (int,), -1),
                                 ("top_logprobs_num", (int,), 0),
                                 ("return_text_in_logprobs", (bool,), False),
                                 ("cache_salt", (str,), ""),
                                 ("extra_key", (str,), ""),
                                 ("rid", (str,), None)):
        values = _per_item(body.get(name), n_prompts, name)
        for v in values:
            _check_type(name, v, types)
        fields[name] = [default if v is None else v for v in values]
    for v in fields["top_logprobs_num"]:
        if not 0 <= v <= MAX_TOP_LOGPROBS_NUM:
            raise RequestValidationError(f"top_logprobs_num must be in [0, "
                                         f"{MAX_TOP_LOGPROBS_NUM}], got {v}")
    for v in fields["logprob_start_len"]:
        if not -1 <= v <= MAX_TOKENS_ANY:
            raise RequestValidationError(f"logprob_start_len must be -1 (only the output) or "
                                         f"a prompt position >= 0, got {v}")
    items: list[GenerateItem] = []
    for i in range(n_prompts):
        n = params[i].n
        base = fields["rid"][i] or uuid.uuid4().hex
        for j in range(n):
            items.append(GenerateItem(
                rid=base if n == 1 else f"{base}-{j}",
                index=len(items),
                text=texts[i], input_ids=ids[i], sampling=params[i],
                return_logprob=fields["return_logprob"][i],
                logprob_start_len=fields["logprob_start_len"][i],
                top_logprobs_num=fields["top_logprobs_num"][i],
                return_text_in_logprobs=fields["return_text_in_logprobs"][i],
                # SGLang's extra_key isolates cache entries as cache_salt does
                cache_salt=_namespace(fields["cache_salt"][i], fields["extra_key"][i]),
                group_rid=base,
                explicit_max_new_tokens=_gives_max_new_tokens(raw_params[i]),
            ))
    rids = [it.rid for it in items]
    if len(set(rids)) != len(rids):
        raise RequestValidationError("rid: request ids must be unique")
    return GenerateRequest(items=items, is_batch=is_batch or len(items) > 1,
                           stream=bool(body.get("stream", False)))
