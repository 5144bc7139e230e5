"""A step budget for rendering a client-supplied chat template.

Jinja compiles a template to Python code whose frames carry the file name ``<template>``. While
``fn`` runs, a trace function (on this thread only) counts the lines those frames execute and
stops the render once ``max_steps`` is spent, so a template that loops millions of times
fails fast with a clear error. The count is of template steps, never wall time, so the
outcome is the same on any machine. Only client templates pay the tracing cost.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")
TEMPLATE_FILENAME = "<template>"


class TemplateBudgetExceeded(RuntimeError):
    """The template ran more steps than allowed."""


def run_with_step_budget(fn: Callable[[], T], max_steps: int) -> T:
    """``fn()``, raising :class:`TemplateBudgetExceeded` after ``max_steps`` template lines."""
    steps = 0

    def local(frame: FrameType, event: str, arg: Any) -> Any:
        nonlocal steps
        if event == "line":
            steps += 1
            if steps > max_steps:
                raise TemplateBudgetExceeded(
                    f"the chat template ran more than {max_steps} steps")
        return local

    def on_call(frame: FrameType, event: str, arg: Any) -> Any:
        # Trace only template frames: library code (Jinja's runtime, filters) runs untraced.
        return local if frame.f_code.co_filename == TEMPLATE_FILENAME else None

    previous = sys.gettrace()
    sys.settrace(on_call)
    try:
        return fn()
    finally:
        sys.settrace(previous)
