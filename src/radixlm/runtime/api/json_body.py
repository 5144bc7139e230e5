"""Strict JSON for request bodies: UTF-8 only, RFC 8259 numbers, 64-bit integers, bounded depth.

Python's ``json`` accepts what later fails deep in the engine (a 500, or a crash): ``NaN`` and
``Infinity``, ``1e400`` (infinity), integers of any size (the msgpack wire is 64-bit), lone
surrogates such as ``"\\ud800"`` (not encodable as UTF-8) and nesting deep enough to exhaust
the recursion limit. Each is refused here with a message naming the problem.
"""

from __future__ import annotations

import json
import math
from typing import Any

from .generate_request import RequestValidationError

MAX_BODY_DEPTH = 64  # arrays/objects inside one another in a request body
MAX_SCHEMA_DEPTH = 48  # the same, inside a JSON schema given as a constraint
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def _constant(name: str) -> Any:
    raise RequestValidationError(f"body is not valid JSON: {name} is not a JSON number")


def _integer(text: str) -> int:
    value = int(text)
    if not INT64_MIN <= value <= INT64_MAX:
        raise RequestValidationError(f"integer {text[:40]} does not fit in 64 bits (limit "
                                     f"{INT64_MAX})")
    return value


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise RequestValidationError(f"number {text[:40]} is out of range (not a finite "
                                     f"double)")
    return value


def loads_strict(text: str, max_depth: int, what: str = "body") -> Any:
    """Parse ``text`` as strict JSON nested at most ``max_depth`` deep, or raise
    :class:`RequestValidationError` saying what is wrong."""
    try:
        value = json.loads(text, parse_constant=_constant, parse_int=_integer,
                           parse_float=_float)
    except json.JSONDecodeError as exc:
        raise RequestValidationError(f"{what} is not valid JSON: {exc}") from None
    except RecursionError:
        raise RequestValidationError(f"{what} is nested too deeply (the limit is "
                                     f"{max_depth} levels)") from None
    check_value(value, max_depth, what)
    return value


def parse_json_body(raw: bytes, max_depth: int = MAX_BODY_DEPTH) -> Any:
    """A request body (empty means ``{}``) as strict JSON."""
    try:
        text = raw.decode("utf-8") if raw else "{}"
    except UnicodeDecodeError as exc:
        raise RequestValidationError(f"body is not UTF-8: byte {exc.start} "
                                     f"({raw[exc.start:exc.start + 1]!r}) is invalid; send "
                                     f"UTF-8 JSON") from None
    return loads_strict(text, max_depth)


def check_value(value: Any, max_depth: int, what: str) -> None:
    """Depth at most ``max_depth``; every string (keys too) encodable as UTF-8.

    Iterative, so a value too deep for recursion is still measured."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, what)
        elif isinstance(node, (list, dict)):
            if depth > max_depth:
                raise RequestValidationError(f"{what} is nested too deeply (the limit is "
                                             f"{max_depth} levels)")
            if isinstance(node, dict):
                for key in node:
                    _check_text(key, what)
                items = node.values()
            else:
                items = node
            stack.extend((v, depth + 1) for v in items if isinstance(v, (str, list, dict)))


def _check_text(text: str, what: str) -> None:
    if text.isascii():
        return
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise RequestValidationError(
            f"{what}: a string holds a lone surrogate (U+{ord(text[exc.start]):04X}) at "
            f"offset {exc.start}, which is not valid Unicode text") from None
