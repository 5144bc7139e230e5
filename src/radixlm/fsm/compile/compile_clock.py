"""The budget of one compile, counted in work steps: the same verdict on any machine.

A compile's work past the schema is the automaton's: the liveness search at the start state
and the first mask (derivatives and liveness states, :attr:`TermBuilder.work_steps`). The
clock refuses the compile once that count passes ``max_steps`` (deterministic: a schema
compiles or is refused the same way under any load), and once ``max_seconds`` of
:func:`..automaton.work_clock.now` have passed (only an outer bound, far above what the steps
take on a working machine). Before the automaton exists (the schema's own compile, bounded by
its expansion count) only the seconds apply.

It is called at every deadline check of the compile (each sub-schema, every few liveness
states): those are also the compile's pause points, where ``pause`` (set by the compiler)
parks it, e.g. while a hold is in force or, past ``quick_steps``, while quicker compiles run.
"""

from __future__ import annotations

from collections.abc import Callable

from ..automaton import work_clock
from ..automaton.derivatives import TermBuilder
from ..errors import GrammarBudgetError

# What turns the warm-up's budget given in seconds into steps. Kept at 1 M (5,000 steps at
# the default 5 ms) although steps cost 0.5-0.7 us now that terms are charged: at 2 M the
# warm-up reached masks whose liveness refused schemas that compiled before (allOfPProp7).
STEPS_PER_SECOND = 1_000_000
# Steps a compile charges per term created on top of :data:`..automaton.derivatives.TERM_STEPS`
# (8): a term costs 10-11 derivative calls of CPU once the collector's share is counted (it
# scans every new term, at ~1 us each; least squares over Handwritten's 49 slowest compiles
# and refusals, thread CPU), so a compile that makes many terms (an object whose key must
# match a pattern) ran 0.45 us a step where one making few (allany15) ran 0.33, and its
# refusal at the budget took 30% longer. 4 is the most under which every schema of the
# corpus that compiled still does (string1, 104 k terms: 1.84 M steps). Compile-only: the
# mask and closing-search budgets keep counting plain work steps.
EXTRA_TERM_STEPS = 4


class CompileClock:
    """Deadline callable of one compile (see module doc); raises :class:`GrammarBudgetError`."""

    def __init__(self, max_steps: int | None, max_seconds: float,
                 pause: Callable[[CompileClock], None] | None = None) -> None:
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.pause = pause
        self._end = work_clock.now() + max_seconds  # GC pauses are not the grammar's work
        self._builder: TermBuilder | None = None
        self._start_steps = 0
        self._start_terms = 0

    def track(self, builder: TermBuilder) -> None:
        """Count ``builder``'s work from now on (the compiled grammar's automaton)."""
        self._builder = builder
        self._start_steps = builder.work_steps
        self._start_terms = builder.num_terms

    def release(self) -> None:
        """The compile was refused: free its automaton now (:meth:`TermBuilder.release`)
        and stop counting."""
        builder, self._builder = self._builder, None
        if builder is not None:
            builder.release()

    @property
    def steps(self) -> int:
        """Work steps this compile has taken so far (0 before the automaton exists): the
        builder's, plus :data:`EXTRA_TERM_STEPS` per term it created."""
        builder = self._builder
        if builder is None:
            return 0
        return (builder.work_steps - self._start_steps
                + EXTRA_TERM_STEPS * (builder.num_terms - self._start_terms))

    def steps_left(self) -> int | None:
        """Steps left before the budget refuses (None: no step limit)."""
        return None if self.max_steps is None else self.max_steps - self.steps

    def exhausted(self) -> bool:
        """Whether the step budget has run out."""
        left = self.steps_left()
        return left is not None and left < 0

    def steps_error(self) -> GrammarBudgetError:
        """The refusal of a compile past its step budget."""
        return GrammarBudgetError(
            "compile steps", f"{self.max_steps} steps",
            "deciding the start of the grammar (liveness of its intersections and "
            "complements, its first mask) took too many derivative and liveness steps "
            "(raise max_compile_steps)")

    def check_steps(self) -> None:
        """A pause point that checks the steps only (inside a mask, whose own outer bound in
        seconds, ``max_mask_seconds``, replaces the compile's)."""
        if self.pause is not None:
            self.pause(self)
        if self.exhausted():
            raise self.steps_error()

    def __call__(self) -> None:
        self.check_steps()
        if work_clock.now() > self._end:
            raise GrammarBudgetError("time", f"{self.max_seconds} s",
                                     "compiling the grammar took too long")
