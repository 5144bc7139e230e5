"""Errors raised by the fsm package (all are ``ValueError``s: the request is at fault)."""

from __future__ import annotations


class GrammarError(ValueError):
    """The grammar (schema, regex, choices) cannot be compiled or enforced; says why."""


class GrammarBudgetError(GrammarError):
    """Compiling or expanding a grammar went over its budget (named in the message)."""

    def __init__(self, budget: str, limit: object, detail: str = "") -> None:
        msg = f"grammar exceeds the {budget} budget ({limit})"
        super().__init__(f"{msg}: {detail}" if detail else msg)
        self.budget = budget
        self.limit = limit
