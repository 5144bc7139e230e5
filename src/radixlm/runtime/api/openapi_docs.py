"""``/openapi.json``: request bodies, error responses and one operation id per operation.

The routes read their bodies themselves (to give errors naming the field), so FastAPI cannot
see the bodies; this module adds them from the same models the routes validate with (the
pydantic OpenAI models, the msgspec :class:`SamplingParams`), adds the error responses every
route can give, and names each operation ``<method>_<path>`` (a route serving GET and POST
would otherwise get one id twice).
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import msgspec
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from ..wire.sampling_params import SamplingParams
from .generate_request import KNOWN_FIELDS
from .openai_api import ChatRequest, CompletionRequest

REF = "#/components/schemas/{}"
ERROR_SCHEMA = {
    "title": "ErrorResponse", "type": "object", "required": ["error"],
    "properties": {"error": {"type": "object", "required": ["message", "code"], "properties": {
        "message": {"type": "string"}, "code": {"type": "string"},
        "type": {"type": "string"}, "param": {"type": ["string", "null"]}}}},
}
ERRORS = {"401": "missing or wrong API key",
          "503": "overloaded (see Retry-After) or the engine is not running"}
BODY_ERRORS = {**ERRORS, "400": "invalid request (the message names the field)",
               "413": "request body too large"}
OPENAI_BODY_ERRORS = {**BODY_ERRORS, "404": "unknown model"}


def _one_or_many(item: dict[str, Any]) -> dict[str, Any]:
    return {"anyOf": [item, {"type": "array", "items": item, "minItems": 1}]}


def _generate_schema() -> dict[str, Any]:
    """SGLang's ``GenerateReqInput`` as ``parse_generate_request`` reads it."""
    ids = {"type": "array", "items": {"type": "integer", "minimum": 0}, "minItems": 1}
    sampling = {"$ref": REF.format("SamplingParams")}
    known = {
        "text": _one_or_many({"type": "string"}),
        "input_ids": _one_or_many(ids),
        "sampling_params": _one_or_many(sampling),
        "rid": _one_or_many({"type": "string"}),
        "return_logprob": _one_or_many({"type": "boolean"}),
        "logprob_start_len": _one_or_many({"type": "integer", "minimum": -1}),
        "top_logprobs_num": _one_or_many({"type": "integer", "minimum": 0}),
        "return_text_in_logprobs": _one_or_many({"type": "boolean"}),
        "cache_salt": _one_or_many({"type": "string"}),
        "stream": {"type": "boolean"},
    }
    # Fields accepted for SGLang compatibility but not described further: any value.
    props = {name: known.get(name, {}) for name in sorted(KNOWN_FIELDS)}
    return {"title": "GenerateRequest", "type": "object", "properties": props,
            "additionalProperties": False}


def _components() -> dict[str, Any]:
    schemas: dict[str, Any] = {"ErrorResponse": ERROR_SCHEMA}
    _, msgspec_defs = msgspec.json.schema_components(
        [SamplingParams], ref_template=REF.format("{name}"))
    schemas.update(msgspec_defs)
    for model in (CompletionRequest, ChatRequest):
        schema = model.model_json_schema(by_alias=True, ref_template=REF.format("{model}"))
        schemas.update(schema.pop("$defs", {}))
        schemas[model.__name__] = schema
    schemas["GenerateRequest"] = _generate_schema()
    schemas["AbortRequest"] = {"title": "AbortRequest", "type": "object", "required": ["rid"],
                               "properties": {"rid": {"type": "string"}}}
    return schemas


BODIES = {"/generate": "GenerateRequest", "/v1/completions": "CompletionRequest",
          "/v1/chat/completions": "ChatRequest", "/abort_request": "AbortRequest"}


def build_openapi(app: FastAPI) -> dict[str, Any]:
    """The app's OpenAPI document with bodies, errors and unique operation ids."""
    with warnings.catch_warnings():  # FastAPI's ids repeat for multi-method routes: renamed
        warnings.filterwarnings("ignore", "Duplicate Operation ID", UserWarning)
        doc = get_openapi(title=app.title, version=app.version, routes=app.routes)
    doc.setdefault("components", {}).setdefault("schemas", {}).update(_components())
    error_ref = {"content": {"application/json": {"schema": {
        "$ref": REF.format("ErrorResponse")}}}}
    for path, operations in doc.get("paths", {}).items():
        for method, op in operations.items():
            op["operationId"] = f"{method}_{re.sub(r'[^0-9A-Za-z]+', '_', path).strip('_')}"
            body = BODIES.get(path)
            errors = ERRORS
            if body is not None and method in ("post", "put"):
                op["requestBody"] = {"required": True, "content": {"application/json": {
                    "schema": {"$ref": REF.format(body)}}}}
                errors = OPENAI_BODY_ERRORS if path.startswith("/v1/") else BODY_ERRORS
            responses = op.setdefault("responses", {})
            responses.pop("422", None)  # FastAPI's own validation is not used
            for status, what in errors.items():
                responses.setdefault(status, {"description": what, **error_ref})
    return doc


def install_openapi(app: FastAPI) -> None:
    """Serve :func:`build_openapi` at ``/openapi.json`` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build_openapi(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
