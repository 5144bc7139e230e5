"""OpenAI-compatible routes: ``/v1/models``, ``/v1/completions``, ``/v1/chat/completions``.

Request bodies are checked by pydantic models that refuse unknown fields (a typo gets a 400
naming it) and map onto the engine's native request; responses, streaming chunks, logprobs,
usage (with cached tokens) and errors follow OpenAI's shapes, so the official ``openai``
package works unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .generate_request import RequestValidationError, parse_generate_request
from .http_common import (
    ServerState,
    error_response,
    openai_error_body,
    read_json,
    sse,
    until_disconnect,
)
from .openai_chat_tools import (
    ChatPlan,
    chat_finish_reason,
    plan_chat,
    stream_delta,
    whole_message,
)

# OpenAI's documented limits: at most 20 top logprobs per chat token, 5 per completion token.
MAX_CHAT_TOP_LOGPROBS = 20
MAX_COMPLETION_LOGPROBS = 5


class _Strict(BaseModel):
    # inf/nan are never valid sampling values (JSON itself has neither)
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)


class StreamOptions(_Strict):
    include_usage: bool = False


class JsonSchemaFormat(_Strict):
    name: str = "response"
    description: str | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Strict):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class _Sampling(_Strict):
    """Fields shared by both endpoints (OpenAI's, then SGLang/vLLM extensions)."""

    model: str | None = None
    max_tokens: int | None = Field(default=None, ge=0)
    temperature: float = Field(default=1.0, ge=0, le=2)
    top_p: float = Field(default=1.0, ge=0, le=1)
    n: int = Field(default=1, ge=1, le=64)
    stop: str | list[str] | None = None
    seed: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float = Field(default=0.0, ge=-2, le=2)
    frequency_penalty: float = Field(default=0.0, ge=-2, le=2)
    user: str | None = None
    # extensions
    top_k: int = -1
    min_p: float = 0.0
    min_tokens: int = 0
    repetition_penalty: float = 1.0
    ignore_eos: bool = False
    stop_token_ids: list[int] | None = None
    stop_regex: str | list[str] | None = None
    regex: str | None = None
    json_schema: str | None = None
    skip_special_tokens: bool = True
    no_stop_trim: bool = False
    cache_salt: str | None = None
    close_within_max_tokens: bool | None = None  # a constrained output closes in max_tokens
    # chat's field; vLLM and SGLang accept it on completions too (a base model has no chat
    # template: its JSON comes from /v1/completions, the openai client passes it in extra_body)
    response_format: ResponseFormat | None = None


class CompletionRequest(_Sampling):
    prompt: str | list[str] | list[int] | list[list[int]]
    max_tokens: int | None = Field(default=16, ge=0)
    logprobs: int | None = Field(default=None, ge=0, le=MAX_COMPLETION_LOGPROBS)
    echo: bool = False
    best_of: int | None = None
    suffix: str | None = None
    logit_bias: dict[str, float] | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "user", "assistant", "tool", "developer"]
    content: str | list[dict[str, Any]] | None = None


class ChatRequest(_Sampling):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = Field(default=None, ge=0)
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=MAX_CHAT_TOP_LOGPROBS)
    tools: list[dict[str, Any]] | None = None
    tool_choice: Any = None
    logit_bias: dict[str, float] | None = None
    parallel_tool_calls: bool | None = None
    chat_template_kwargs: dict[str, Any] | None = None
    separate_reasoning: bool = True  # SGLang: reasoning_content apart from content


def _parse(model: type[BaseModel], body: Any) -> Any:
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "body"
        raise RequestValidationError(f"field '{where}': {first['msg']}") from None


def _sampling(req: _Sampling, max_tokens: int | None) -> dict[str, Any]:
    params = {
        "max_new_tokens": max_tokens, "temperature": req.temperature, "top_p": req.top_p,
        "n": req.n, "stop": req.stop, "seed": req.seed, "top_k": req.top_k,
        "min_p": req.min_p, "min_new_tokens": req.min_tokens,
        "presence_penalty": req.presence_penalty, "frequency_penalty": req.frequency_penalty,
        "repetition_penalty": req.repetition_penalty, "ignore_eos": req.ignore_eos,
        "stop_token_ids": req.stop_token_ids, "stop_regex": req.stop_regex, "regex": req.regex,
        "json_schema": req.json_schema, "skip_special_tokens": req.skip_special_tokens,
        "no_stop_trim": req.no_stop_trim, "logit_bias": getattr(req, "logit_bias", None),
        "close_within_max_tokens": req.close_within_max_tokens,
    }
    return {k: v for k, v in params.items() if v is not None}


def _unsupported(req: Any, **checks: bool) -> None:
    for name, bad in checks.items():
        if bad:
            raise RequestValidationError(f"field '{name}': not supported by radixlm; leave it "
                                         f"unset")


def _finish(reason: dict[str, Any] | None) -> str | None:
    return None if reason is None else reason.get("type")


def _usage(results: list[dict[str, Any]], n: int = 1) -> dict[str, Any]:
    # results are prompt-major (prompt i's choices at i*n .. i*n+n-1): count each prompt once
    firsts = [r["meta_info"] for r in results[::n]]
    prompt = sum(m.get("prompt_tokens", 0) for m in firsts)
    cached = sum(m.get("cached_tokens", 0) for m in firsts)
    completion = sum(r["meta_info"].get("completion_tokens", 0) for r in results)
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached}}


def _token_bytes(text: str | None) -> list[int]:
    return list((text or "").encode("utf-8"))


def _echo_texts(state: ServerState, req: CompletionRequest, key: str) -> list[str]:
    """With ``echo``, the text of each prompt (token-id prompts are decoded); else []."""
    if not req.echo:
        return []
    prompt = req.prompt
    if key == "text":
        return [prompt] if isinstance(prompt, str) else list(prompt)
    seqs = prompt if isinstance(prompt[0], list) else [prompt]
    return [state.tokenizer.decode(ids) for ids in seqs]


def _completion_logprobs(meta: dict[str, Any], offset0: int, echo: str | None = None
                         ) -> dict[str, Any]:
    """OpenAI ``logprobs`` of a completion choice. With ``echo`` (the echoed prompt text) the
    prompt's tokens come first (the first has no context: logprob null) and ``text_offset``
    indexes the echoed text, as lm-eval-harness expects: a special token the text does not
    show (the BOS) takes no width."""
    entries = meta.get("output_token_logprobs", [])
    tops = meta.get("output_top_logprobs", [])
    hidden_first = False
    if echo is not None:
        prompt = meta.get("input_token_logprobs", [])
        entries = prompt + entries
        tops = (meta.get("input_top_logprobs", []) or [None] * len(prompt)) + tops
        hidden_first = bool(prompt) and not echo.startswith(prompt[0][2] or "")
    tokens = [e[2] or "" for e in entries]
    offsets, pos = [], offset0
    for k, t in enumerate(tokens):
        offsets.append(pos)
        pos += 0 if k == 0 and hidden_first else len(t)
    return {"tokens": tokens, "token_logprobs": [e[0] for e in entries],
            "top_logprobs": [{(t[2] or ""): t[0] for t in top} if top else None
                             for top in tops] or None,
            "text_offset": offsets}


def _chat_logprobs(meta: dict[str, Any]) -> dict[str, Any]:
    entries = meta.get("output_token_logprobs", [])
    tops = meta.get("output_top_logprobs", []) or [[]] * len(entries)
    return {"content": [
        {"token": e[2] or "", "logprob": e[0], "bytes": _token_bytes(e[2]),
         "top_logprobs": [{"token": t[2] or "", "logprob": t[0], "bytes": _token_bytes(t[2])}
                          for t in (top or [])]}
        for e, top in zip(entries, tops)]}


def add_openai_routes(app: FastAPI, state: ServerState) -> None:

    model_name = state.args.model_name
    # The names a request's ``model`` may give: the served name, the path it was loaded
    # from (and that path's last part), and SGLang's "default".
    aliases = {model_name, state.args.model_path, Path(state.args.model_path).name, "default"}

    def unknown_model(req: _Sampling) -> Response | None:
        if req.model is None or req.model in aliases:
            return None
        return error_response(f"The model `{req.model}` does not exist; this server serves "
                              f"`{model_name}`", 404, "model_not_found", openai=True,
                              param="model")

    def model_card() -> dict[str, Any]:
        return {"id": model_name, "object": "model", "created": int(state.started),
                "owned_by": "radixlm", "max_model_len": state.procs.info.get("max_context")}

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [model_card()]}

    @app.get("/v1/models/{model_id:path}")
    async def model(model_id: str) -> Response:
        if model_id != model_name:
            return error_response(f"The model {model_id!r} does not exist; this server "
                                  f"serves {model_name!r}", 404, "model_not_found",
                                  openai=True, param="model")
        return JSONResponse(model_card())

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:

        req: CompletionRequest = _parse(CompletionRequest, await read_json(request))
        if (missing := unknown_model(req)) is not None:
            return missing
        _unsupported(req, suffix=bool(req.suffix), best_of=req.best_of not in (None, req.n))
        prompt = req.prompt
        key = "input_ids" if isinstance(prompt, list) and prompt and not isinstance(
            prompt[0], str) else "text"
        want_lp = req.logprobs is not None
        params = {**_sampling(req, req.max_tokens), **_response_format(req.response_format)}
        body = {key: prompt, "sampling_params": params,
                "stream": req.stream, "return_logprob": want_lp,
                "top_logprobs_num": req.logprobs or 0, "return_text_in_logprobs": True,
                "cache_salt": req.cache_salt,
                # echo + logprobs scores the prompt too (lm-eval-harness: max_tokens=0)
                "logprob_start_len": 0 if req.echo and want_lp else None}
        gen = parse_generate_request({k: v for k, v in body.items() if v is not None})
        rid, created = f"cmpl-{uuid.uuid4().hex}", int(time.time())
        echo = _echo_texts(state, req, key)
        if req.stream:
            return await sse(request, _stream_completion(state, gen, rid, created, model_name,
                                                         req, want_lp, echo), openai_error_body)
        results = await until_disconnect(request, state.manager.generate_once(gen))
        results = results if isinstance(results, list) else [results]
        choices = []
        for i, r in enumerate(results):
            prefix = echo[i // req.n] if echo else ""
            choices.append({"index": i, "text": prefix + r["text"],
                            "logprobs": _completion_logprobs(r["meta_info"], 0,
                                                             prefix if echo else None)
                            if want_lp else None,
                            "finish_reason": _finish(r["meta_info"]["finish_reason"])})
        return JSONResponse({"id": rid, "object": "text_completion", "created": created,
                             "model": model_name, "choices": choices,
                             "usage": _usage(results, req.n)})

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:

        req: ChatRequest = _parse(ChatRequest, await read_json(request))
        if (missing := unknown_model(req)) is not None:
            return missing
        if req.top_logprobs is not None and not req.logprobs:
            raise RequestValidationError("field 'top_logprobs': requires logprobs=true")
        plan = await state.manager.offload(plan_chat, state, req)  # off the event loop
        params = _sampling(req, req.max_completion_tokens or req.max_tokens)
        params.update(_response_format(req.response_format))
        params.update(plan.grammar)
        gen = parse_generate_request({
            "text": plan.prompt, "sampling_params": params, "stream": req.stream,
            "return_logprob": req.logprobs, "top_logprobs_num": req.top_logprobs or 0,
            "return_text_in_logprobs": True,
            **({"cache_salt": req.cache_salt} if req.cache_salt else {}),
        })
        if plan.constraint_after is not None:  # reasoning first, then the constraint
            gen = dataclasses.replace(gen, items=[dataclasses.replace(
                it, grammar_after=plan.constraint_after) for it in gen.items])
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        if req.stream:
            return await sse(request, _stream_chat(state, gen, rid, created, model_name, req,
                                                   plan), openai_error_body)
        results = await until_disconnect(request, state.manager.generate_once(gen))
        results = results if isinstance(results, list) else [results]
        choices = []
        for i, r in enumerate(results):
            decoder = plan.decoder()
            message = whole_message(decoder, r["text"])
            choices.append({"index": i, "message": message, "logprobs": _chat_logprobs(
                r["meta_info"]) if req.logprobs else None, "finish_reason": chat_finish_reason(
                _finish(r["meta_info"]["finish_reason"]), decoder)})
        return JSONResponse({"id": rid, "object": "chat.completion", "created": created,
                             "model": model_name, "choices": choices,
                             "usage": _usage(results, req.n)})


def _response_format(fmt: ResponseFormat | None) -> dict[str, Any]:
    if fmt is None or fmt.type == "text":
        return {}
    if fmt.type == "json_object":
        return {"json_object": True}
    if fmt.json_schema is None or fmt.json_schema.schema_ is None:
        raise RequestValidationError("field 'response_format.json_schema.schema': required "
                                     "for type json_schema")
    return {"json_schema": json.dumps(fmt.json_schema.schema_)}


async def _deltas(state: ServerState, gen: Any) -> AsyncIterator[tuple[int, str, dict]]:
    """(choice index, new text, chunk) for each update of a streamed request."""
    seen: dict[int, int] = {}
    async for chunk in state.manager.generate(gen):
        i = chunk.get("index", 0)
        text = chunk["text"]
        delta = text[seen.get(i, 0):]
        seen[i] = len(text)
        yield i, delta, chunk


async def _stream_completion(state: ServerState, gen: Any, rid: str, created: int,
                             model: str, req: CompletionRequest, want_lp: bool,
                             echo: list[str]) -> AsyncIterator[dict[str, Any]]:
    finals: dict[int, dict] = {}
    echoed: set[int] = set()
    async for i, delta, chunk in _deltas(state, gen):
        meta = chunk["meta_info"]  # stream chunks carry only the new output logprobs
        prefix = None  # the echoed prompt goes out with a choice's first chunk
        if echo and i not in echoed:
            echoed.add(i)
            prefix = echo[i // req.n]
            delta = prefix + delta
        lp = _completion_logprobs(meta, 0, prefix) if want_lp else None
        reason = _finish(meta["finish_reason"])
        if reason is not None:
            finals[i] = chunk
        yield {"id": rid, "object": "text_completion", "created": created, "model": model,
               "choices": [{"index": i, "text": delta, "logprobs": lp,
                            "finish_reason": reason}]}
    if req.stream_options and req.stream_options.include_usage:
        yield {"id": rid, "object": "text_completion", "created": created, "model": model,
               "choices": [], "usage": _usage([finals[i] for i in sorted(finals)], req.n)}


async def _stream_chat(state: ServerState, gen: Any, rid: str, created: int, model: str,
                       req: ChatRequest, plan: ChatPlan) -> AsyncIterator[dict[str, Any]]:
    base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}
    started: set[int] = set()
    decoders: dict[int, Any] = {}
    finals: dict[int, dict] = {}
    async for i, delta, chunk in _deltas(state, gen):
        meta = chunk["meta_info"]  # stream chunks carry only the new output logprobs
        if i not in started:
            started.add(i)
            yield {**base, "choices": [{"index": i, "delta": {"role": "assistant",
                                                              "content": ""},
                                        "logprobs": None, "finish_reason": None}]}
        lp = _chat_logprobs(meta) if req.logprobs else None
        reason = _finish(meta["finish_reason"])
        decoder = decoders.setdefault(i, plan.decoder())
        events = decoder.feed(delta)
        if reason is not None:
            finals[i] = chunk
            events += decoder.finish()
            reason = chat_finish_reason(reason, decoder)
        if events or (lp and lp["content"]) or reason is not None:
            yield {**base, "choices": [{"index": i, "delta": stream_delta(events),
                                        "logprobs": lp, "finish_reason": reason}]}
    if req.stream_options and req.stream_options.include_usage:
        yield {**base, "choices": [], "usage": _usage([finals[i] for i in sorted(finals)],
                                                      req.n)}
