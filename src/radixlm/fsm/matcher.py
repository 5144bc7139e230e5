"""Per-request grammar state: accept tokens, fill bitmasks, roll back, jump forward.

EOS is "finish": an EOS id is accepted only where the grammar may end, and after it nothing
else is. Every state the matcher passes through is kept, so rollback is exact for any depth
(an int per token).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np
import torch

from .automaton.lazy_dfa import DEAD
from .errors import GrammarError

if TYPE_CHECKING:
    from .compiled_grammar import CompiledGrammar

_FINISHED = -1  # history marker for an accepted EOS


def copy_row(out: np.ndarray, words: np.ndarray) -> None:
    """``out[:] = words`` without releasing the GIL. ``np.copyto`` releases it for arrays of
    more than a few hundred elements (a 49k vocabulary's mask is 1,536 words), and a thread
    that releases the GIL while another waits for it (the grammar compiler's worker, building
    masks in Python) gets it back only after that thread yields: up to the switch interval,
    or longer while the worker is in a C call holding it. A 6 KB memcpy under the GIL costs
    well under a microsecond. Other dtypes or layouts take numpy's copy."""
    if out.dtype == words.dtype and out.shape == words.shape and out.flags.c_contiguous \
            and words.flags.c_contiguous:
        memoryview(out).cast("B")[:] = memoryview(words).cast("B")
    else:
        np.copyto(out, words)


class GrammarMatcher:
    """Cursor of one request over a :class:`CompiledGrammar`."""

    __slots__ = ("grammar", "_history")

    def __init__(self, grammar: CompiledGrammar, history: list[int] | None = None) -> None:
        self.grammar = grammar
        self._history = history if history is not None else [grammar.initial_state]

    @property
    def state(self) -> int:
        """Current automaton state (the state before EOS once finished)."""
        h = self._history
        return h[-2] if h[-1] == _FINISHED else h[-1]

    @property
    def num_tokens(self) -> int:
        """Tokens accepted so far (EOS included): the maximum rollback."""
        return len(self._history) - 1

    def is_finished(self) -> bool:
        """Whether EOS has been accepted."""
        return self._history[-1] == _FINISHED

    def can_end(self) -> bool:
        """Whether the text so far is complete (EOS would be accepted now)."""
        return not self.is_finished() and bool(self.grammar.dfa.accepting[self._history[-1]])

    def must_end(self) -> bool:
        """Whether only EOS can follow (the runtime may stop without sampling)."""
        return self.can_end() and not self.grammar.has_text_continuation(self._history[-1])

    def accept_token(self, token_id: int) -> bool:
        """Advance by one token; False (state unchanged) when the token is not allowed."""
        if self.is_finished():
            return False
        state = self._history[-1]
        if token_id in self.grammar.eos_ids:
            if not self.grammar.dfa.accepting[state]:
                return False
            self._history.append(_FINISHED)
            return True
        nxt = self.grammar.next_state(state, token_id)
        if nxt == DEAD:
            return False
        self._history.append(nxt)
        return True

    def advance_ready(self, token_id: int, jump: bool = True) -> bool:
        """Whether :meth:`accept_token` of ``token_id``, then :meth:`must_end` and (``jump``)
        :meth:`jump_forward_string`, would build no automaton row nor compute a mask on the
        caller's thread (no lock taken, nothing built; see
        :meth:`CompiledGrammar.advance_ready`). A caller that cannot wait defers the
        advance: :meth:`prefetch_advance`, then advance once this is True."""
        return self.is_finished() or self.grammar.advance_ready(self._history[-1], token_id,
                                                                jump)

    def prefetch_advance(self, token_id: int) -> None:
        """Queue what advancing by ``token_id`` needs for the background warm-up, ahead of
        masks (:meth:`GrammarCompiler.prefetch_advance` also schedules the warm-up)."""
        if not self.is_finished():
            self.grammar.prefetch_advance(self._history[-1], token_id)

    def wait_advance_ready(self, token_id: int, jump: bool, seconds: float) -> bool:
        """Sleep (the GIL released) at most about ``seconds`` for :meth:`advance_ready`."""
        return self.is_finished() or self.grammar.wait_advance(self._history[-1], token_id,
                                                               jump, seconds)

    def advance_error(self, token_id: int) -> Exception | None:
        """Why the warm-up could not prepare advancing by ``token_id`` (a budget), if so."""
        if self.is_finished():
            return None
        return self.grammar.advance_error(self._history[-1], token_id)

    def accept_tokens(self, token_ids: list[int]) -> bool:
        """Accept all tokens or none (state unchanged on failure)."""
        depth = len(self._history)
        for t in token_ids:
            if not self.accept_token(t):
                del self._history[depth:]
                return False
        return True

    def mask_ready(self, closing: bool | int = False) -> bool:
        """Whether :meth:`fill_bitmask` would cost one copy now (no mask to compute); with
        ``closing``, :meth:`close_within` too (True: the state's closing row is ready; an
        int, the ``remaining`` passed to :meth:`close_within`: what it needs for that budget
        is, the row only where that budget may cut the mask)."""
        state = self._history[-1]
        return state == _FINISHED or self.grammar.mask_ready(state) and (
            closing is False or self.grammar.closing_ready(state, _budget(closing)))

    def wait_mask_ready(self, seconds: float, closing: bool | int = False) -> bool:
        """Wait up to about ``seconds`` (sleeping, the GIL released) for the background
        warm-up to make :meth:`mask_ready` true; computes nothing on the caller's thread.
        Prefetch the state first (:meth:`GrammarCompiler.prefetch`) or nothing computes it
        (with ``closing``, the grammar's ``closing_used`` must be set too)."""
        state = self._history[-1]
        if state == _FINISHED:
            return True
        if closing is not False:  # True (the row) or an int (that budget: see mask_ready)
            return self.grammar.wait_closing(state, seconds, _budget(closing))
        return self.grammar.wait_mask(state, seconds)

    def prefetch(self, remaining: int | None = None) -> bool:
        """Queue the current state's mask (and its successors') for the background warm-up;
        True when it is ready already. See :meth:`GrammarCompiler.prefetch`, which also
        schedules the warm-up. ``remaining``: the budget :meth:`close_within` will be given
        (its closing row is then computed only where that budget may cut the mask)."""
        state = self._history[-1]
        return state == _FINISHED or self.grammar.prefetch(state, remaining)

    def fill_bitmask(self, out: torch.Tensor | np.ndarray) -> None:
        """Write the allowed-token bitmask (int32 ``[ceil(V/32)]`` row) into ``out``.

        Bit t set = token t allowed; EOS bits are set where the grammar may end. Once
        finished, only EOS is set (so a runtime padding the step still gets a legal token).
        ``out`` may be a CPU numpy row (a view of the batch's bitmask tensor): the fastest
        path, a dict lookup and a 1 KB copy without torch's dispatch. A mask that was not
        ready is computed here and counted in ``grammar.waits``.
        """
        state = self._history[-1]
        if isinstance(out, np.ndarray):
            words = self.grammar.cached_np_masks.get(state)  # the hot path
            if words is None:
                words = (self.grammar.eos_mask if state == _FINISHED
                         else self._cold_mask(state)).numpy()
            copy_row(out, words)
            return
        if state == _FINISHED:
            out.copy_(self.grammar.eos_mask)
            return
        mask = self.grammar.cached_masks.get(state)  # one dict lookup
        out.copy_(mask if mask is not None else self._cold_mask(state))

    def fill_bitmask_within(self, out: np.ndarray, seconds: float) -> bool:
        """Like :meth:`fill_bitmask` into a numpy row, but give up after about ``seconds``
        when the mask is not ready (False: ``out`` untouched; hold this request out of the
        step and try again, the work done is kept). Counted in ``grammar.waits``."""
        state = self._history[-1]
        words = self.grammar.cached_np_masks.get(state)
        if words is None and state != _FINISHED:
            start = time.perf_counter()
            mask = self.grammar.mask_within(state, seconds)
            self.grammar.waits.add(time.perf_counter() - start, deferred=mask is None)
            if mask is None:
                return False
            words = mask.numpy()
        copy_row(out, self.grammar.eos_mask.numpy() if words is None else words)
        return True

    def _cold_mask(self, state: int) -> torch.Tensor:
        start = time.perf_counter()
        try:
            return self.grammar.mask(state)
        finally:
            self.grammar.waits.add(time.perf_counter() - start)

    def tokens_to_close(self) -> int | None:
        """Tokens that surely complete the output from here (0 once finished or where it
        may end; an upper bound: the tokens of a completion found by a search, see
        :mod:`.tokens.closing_index`). None: no such path was found within the search's
        budget, so no budget can be promised. May build automaton rows."""
        if self.is_finished():
            return 0
        return self.grammar.closing.dist(self._history[-1])

    def close_within(self, out: np.ndarray, remaining: int) -> bool:
        """Cut the mask in ``out`` (filled by :meth:`fill_bitmask`) to the tokens after which
        the output can still be completed within ``remaining - 1`` more tokens; EOS stays
        where it was allowed. Returns whether any allowed token was removed. Given
        ``tokens_to_close() <= remaining``, the cut mask keeps at least one token and never
        leads to a state that cannot close in time. May walk the vocabulary (first use of a
        state: see :meth:`ClosingIndex.row`). A state with neither row nor span (one nobody
        prefetched: a speculative verify's draft states) gets its span first
        (:meth:`_take_span`), so a budget that cuts nothing builds no row (as the warm-up)."""
        state = self._history[-1]
        if state == _FINISHED:
            return False
        closing = self.grammar.closing
        if closing.cuts(state, remaining) is None:
            self._take_span(state)
        words = closing.closing_words(state, remaining)
        if words is None:
            return False
        keep = words | self.grammar.vocab.eos_words
        removed = bool(np.any(out & ~keep))
        np.bitwise_and(out, keep, out=out)
        return removed

    def _take_span(self, state: int) -> None:
        """Compute the closing span of ``state`` (:meth:`ClosingIndex.span`) from the mask
        walk's successors: those it kept, else a walk of their own (a state sharing another's
        mask has none kept). Cheaper than the row, whose cost is mostly the per-token sort
        of the successors' distances (``np.unique`` over every allowed token). A walk that
        hits a budget leaves the span unknown: the row decides, as before."""
        grammar = self.grammar
        successors = grammar.index.cached_successors(state)
        if successors is None:
            try:
                with grammar.dfa.lock:  # the walk may build automaton rows
                    successors = grammar.index.successors(state)[0]
            except GrammarError:
                return
        grammar.closing.span(state, successors)  # distance searches only (cached per state)

    def rollback(self, num_tokens: int) -> None:
        """Undo the last ``num_tokens`` accepted tokens (EOS counts as one)."""
        if not 0 <= num_tokens <= self.num_tokens:
            raise ValueError(f"rollback: expected 0 <= num_tokens <= {self.num_tokens}, got "
                             f"{num_tokens}")
        if num_tokens:
            del self._history[-num_tokens:]

    def copy(self) -> GrammarMatcher:
        """An independent matcher at the same position."""
        return GrammarMatcher(self.grammar, list(self._history))

    def reset(self) -> None:
        """Back to the start."""
        del self._history[1:]

    def jump_forward_string(self) -> str:
        """The text every valid continuation starts with ("" if none; never in final states)."""
        if self.is_finished():
            return ""
        return self.grammar.compressed.jump_string(self._history[-1])


def _budget(closing: bool | int) -> int | None:
    """The ``remaining`` of a ``closing`` argument: None for True (the whole closing row)."""
    return None if closing is True else int(closing)
