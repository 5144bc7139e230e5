"""Errors raised by programs."""

from __future__ import annotations


class ProgramError(RuntimeError):
    """A program failed; the original error is the ``__cause__``."""
