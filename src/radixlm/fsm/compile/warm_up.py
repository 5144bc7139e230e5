"""The warm-up of a compiled grammar: what the compiler's worker computes ahead of decoding.

Decoding asks (:meth:`GrammarWarmUp.prefetch` after each accepted token,
:meth:`GrammarWarmUp.prefetch_advance` for a token whose advance would build automaton rows);
the worker's :meth:`GrammarWarmUp.warm_up` computes first the advances asked for, then the
masks (and closing rows) asked for, which decoding waits for (``urgent_pending``), then the
look-ahead: the masks of the states one token after them, then the rest breadth first over
the clamped automaton. Look-ahead and breadth-first work are speculative: at each pause
point they give way to urgent work (this grammar's, or a queued job's:
:mod:`.urgent_work`), the rows built kept. Callers sleep for what they asked for
(:meth:`GrammarWarmUp.wait_mask`, :meth:`GrammarWarmUp.wait_advance`), the GIL released. A
budget hit is kept for the state or advance that hit it, so a caller waiting for it fails at
once instead of retrying.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ..automaton.lazy_dfa import DEAD
from ..errors import GrammarError
from ..tokens.token_index import MaskDeferred

if TYPE_CHECKING:
    import torch

    from ..automaton.compressed_fsm import CompressedFSM
    from ..automaton.lazy_dfa import LazyDFA
    from ..tokens.closing_index import ClosingIndex
    from ..tokens.token_index import TokenIndex
    from ..tokens.vocabulary import TokenVocabulary


class GrammarWarmUp:
    """The warm-up queues and their worker side, a base of
    :class:`~radixlm.fsm.compiled_grammar.CompiledGrammar` (which answers masks and walks;
    this computes them ahead). It reads the grammar's automaton, index and lock, and calls
    its :meth:`mask` and :meth:`_token_data`."""

    # the compiled grammar's, set by its __init__ before _init_warm_up
    dfa: LazyDFA
    index: TokenIndex
    vocab: TokenVocabulary
    compressed: CompressedFSM
    cached_np_masks: dict[int, Any]
    stats: Any  # its GrammarStats: warm-up counts the masks it computed there
    _lock: threading.RLock
    closing: ClosingIndex
    mask: Callable[[int], torch.Tensor]
    _token_data: Callable[[int], bytes | None]

    def _init_warm_up(self) -> None:
        """Empty queues, the breadth-first one at the start state (the automaton is built)."""
        self._warm_queue = deque([self.dfa.initial])  # breadth-first warm-up, resumable
        self._warm_paths: dict[int, bytes] = {self.dfa.initial: b""}
        self._warm_keys: set[int] = set()
        # states decoding is at (asked for by prefetch, newest first): needed now
        self._hot: deque[int] = deque()
        # look-ahead: the states one token after a prefetched state (the newest one's
        # first), warmed after the hot states and before the breadth-first queue
        self._ahead: deque[int] = deque()
        self.prefetch_scheduled = False  # a background slice is queued for the hot states
        # notified after the warm-up computes a mask (or fails one): what wait_mask sleeps on
        self._mask_added = threading.Condition(threading.Lock())
        # states whose mask the warm-up could not compute (a budget hit): the error is raised
        # again by mask() at once, so a caller that waited for it fails instead of retrying
        self._failed: dict[int, GrammarError] = {}
        # (state, token) advances a scheduler deferred because they would build automaton
        # rows (see advance_ready): warmed before everything else, as decoding waits on them
        self._advances: deque[tuple[int, int]] = deque()
        self._failed_advances: dict[tuple[int, int], GrammarError] = {}
        # set once a request closes its output within its token budget with this grammar:
        # the warm-up then computes the closing row of each state prefetched (depth 0)
        self.closing_used = False
        self._closing_budgets: dict[int, int] = {}  # state -> the least remaining prefetched

    def closing_ready(self, state: int, remaining: int | None = None) -> bool:
        """Whether the closing row of ``state`` is a lookup now (or its mask failed); with
        ``remaining``, whether cutting the mask to that budget is (the row, or a span showing
        that the budget cuts nothing: :meth:`ClosingIndex.cuts`)."""
        if self.closing.row_ready(state) or state in self._failed:
            return True
        return remaining is not None and self.closing.cuts(state, remaining) is False

    def wait_closing(self, state: int, seconds: float, remaining: int | None = None) -> bool:
        """Sleep (the GIL released) until the mask and closing row of ``state`` are ready
        (with ``remaining``: see :meth:`closing_ready`), at most about ``seconds``; True when
        ready (prefetch the state first)."""
        def ready() -> bool:
            return self.mask_ready(state) and self.closing_ready(state, remaining)

        if ready():
            return True
        if seconds <= 0:
            return False
        with self._mask_added:
            return self._mask_added.wait_for(ready, seconds)

    def mask_ready(self, state: int) -> bool:
        """Whether filling the mask of ``state`` costs one copy now: it is cached, or the
        warm-up failed it (filling raises that error at once)."""
        return state in self.cached_np_masks or state in self._failed

    def wait_mask(self, state: int, seconds: float) -> bool:
        """Sleep (the GIL released) until :meth:`mask_ready` for ``state``, at most about
        ``seconds``; True when ready. Computes nothing itself: the mask must have been asked
        for (:meth:`prefetch`) for the warm-up to produce it."""
        if self.mask_ready(state):
            return True
        if seconds <= 0:
            return False
        with self._mask_added:
            return self._mask_added.wait_for(lambda: self.mask_ready(state), seconds)

    def _notify_mask(self) -> None:
        with self._mask_added:
            self._mask_added.notify_all()

    def prefetch(self, state: int, remaining: int | None = None) -> bool:
        """Ask the warm-up to compute ``state``'s mask, then those of the states one token
        after it, before anything else; True when ``state``'s mask is ready already (its
        successors are queued either way). Cheap: call it after every accepted token.
        """
        ready = self.mask_ready(state)
        if remaining is not None:  # the closing row only where that budget may cut
            self._closing_budgets[state] = min(remaining,
                                               self._closing_budgets.get(state, remaining))
        self._hot.appendleft(state)
        if len(self._hot) > _MAX_HOT:  # oldest requests are stale: decoding moved on
            self._hot.pop()
        return ready

    # -- advances decided ahead (the scheduler's critical path) ---------------------------

    def advance_ready(self, state: int, token_id: int, jump: bool = True) -> bool:
        """Whether advancing from ``state`` by ``token_id`` builds no automaton row and
        computes no mask on the caller's thread: the token's walk (:meth:`next_state`), the
        end check (:meth:`has_text_continuation`, which needs the next state's mask when it
        is accepting) and, with ``jump``, the forced run after it. Takes no lock, builds
        nothing (a few microseconds). True too when the advance's warm-up failed
        (:meth:`advance_error` says why) or the token is not allowed (refused at once)."""
        if token_id in self.eos_ids or (state, token_id) in self._failed_advances:
            return True
        data = self._token_data(token_id)
        if data is None:
            return True
        nxt = self.dfa.walk_built(state, data)
        if nxt is None:
            return False
        if nxt == DEAD:
            return True
        accepting = self.dfa.accepting
        if nxt >= accepting.shape[0]:  # registered as the table grew: read again later
            return False
        if accepting[nxt] and not self.mask_ready(nxt):
            return False
        return not jump or self.compressed.run_ready(nxt)

    def advance_error(self, state: int, token_id: int) -> GrammarError | None:
        """Why warming the advance from ``state`` by ``token_id`` failed (a budget), if it did."""
        return self._failed_advances.get((state, token_id))

    def prefetch_advance(self, state: int, token_id: int) -> None:
        """Ask the warm-up to build what advancing from ``state`` by ``token_id`` needs (see
        :meth:`advance_ready`), before any mask; :meth:`wait_advance` sleeps for it."""
        if (state, token_id) not in self._advances:
            self._advances.append((state, token_id))

    def wait_advance(self, state: int, token_id: int, jump: bool, seconds: float) -> bool:
        """Sleep (the GIL released) until :meth:`advance_ready`, at most about ``seconds``;
        True when ready. Computes nothing itself (prefetch the advance first)."""
        if self.advance_ready(state, token_id, jump):
            return True
        if seconds <= 0:
            return False
        with self._mask_added:
            return self._mask_added.wait_for(
                lambda: self.advance_ready(state, token_id, jump), seconds)

    def _warm_advance(self, state: int, token_id: int) -> None:
        """Build the rows (and the mask, at an accepting state) that advancing from ``state``
        by ``token_id`` needs; a budget hit is kept for :meth:`advance_error`."""
        with self._lock:
            try:
                data = self._token_data(token_id)
                nxt = DEAD if data is None else self._walk_pausing(state, data)
                if nxt != DEAD:
                    self.dfa.build_row(nxt)
                    if self.dfa.accepting[nxt]:
                        self.mask(nxt)
                    self.compressed.run(nxt)
            except MaskDeferred:
                self._advances.appendleft((state, token_id))
                raise
            except GrammarError as exc:
                self._failed_advances[(state, token_id)] = exc
            self._notify_mask()

    def _walk_pausing(self, state: int, data: bytes) -> int:
        """:meth:`LazyDFA.walk`, with the warm-up's pause point (``yield_when``) after each
        row it builds, as a mask's walk has: a worker held off the GIL parks there."""
        dfa = self.dfa
        for byte in data:
            if not dfa.built[state]:
                dfa.build_row(state)
                pause = self.index.yield_when
                if pause is not None and pause():
                    raise MaskDeferred  # the rows built stay: the retry resumes
            state = int(dfa.trans[state, byte])
            if state == DEAD:
                break
        return state

    def warm_up(self, max_states: int, max_seconds: float, polite: bool = False,
                stop: Callable[[], bool] | None = None,
                yield_to: Callable[[], bool] | None = None,
                prefetched_only: bool = False,
                urgent: Callable[[], bool] | None = None) -> dict[int, bytes]:
        """Compute up to ``max_states`` more distinct masks (or for ``max_seconds``, whichever
        comes first): first the states :meth:`prefetch` asked for and the states one token
        after them (where decoding is), then breadth first over the clamped automaton (states
        that share a mask are visited once), resuming where the previous call stopped;
        returns the byte path from the start to each state the breadth-first part warmed
        (the disk cache stores those). The rest is computed on first visit.

        ``polite`` (background warm-up): release the GIL once a millisecond, so a thread that
        waits for it (the scheduler, a compile) waits about that long, not the interpreter's
        5 ms switch interval. ``stop``: checked after each mask; True ends the call early.
        ``yield_to``: checked also inside a mask, at each automaton row it builds; True ends
        the call at once, that mask left for later (the rows built stay, so the next call
        resumes it; the masks are the same either way). A 131k-token mask can take tens of
        milliseconds: this is what keeps a compile from waiting that long for the GIL.
        ``prefetched_only``: stop once nothing :meth:`prefetch` or :meth:`prefetch_advance`
        asked for is left (a prefetch's slice; the breadth-first part is the background
        warm-up's, within its own ``background_warmup_states``). ``urgent``: called at each
        pause point of speculative work (look-ahead, breadth first; it may park there):
        whether a job decoding waits for is queued elsewhere (:meth:`UrgentWork.waiting`);
        speculative work stops there when it is, or when this grammar has urgent work
        (``urgent_pending``), its state requeued first.

        Raises :class:`GrammarError` when a reachable non-final state allows no token at all
        (the vocabulary cannot spell what the grammar requires there).
        """
        done: dict[int, bytes] = {}
        end = time.perf_counter() + max_seconds
        next_yield = time.perf_counter() + _POLITE_SLICE
        hot_done = 0
        def pending() -> bool:
            return self.prefetch_pending if prefetched_only else self.warm_up_pending

        while pending() and len(done) + hot_done < max_states and \
                (not done and not hot_done or time.perf_counter() < end):
            try:
                hot_done += self._warm_next(done, yield_to, urgent)
            except MaskDeferred:
                break
            if polite and time.perf_counter() > next_yield:
                time.sleep(0)
                next_yield = time.perf_counter() + _POLITE_SLICE
            if stop is not None and stop():
                break
        self.stats.warmup_states += len(done) + hot_done
        return done

    def _warm_next(self, done: dict[int, bytes], yield_to: Callable[[], bool] | None,
                   urgent: Callable[[], bool] | None = None) -> int:
        """One step of :meth:`warm_up` (a deferred advance, else a prefetched state, else a
        look-ahead state, else the breadth-first queue's next; 1 if it computed a prefetched
        or look-ahead mask); raises :class:`MaskDeferred` when ``yield_to`` (or, for the
        speculative ones, urgent work: see :meth:`warm_up`) stopped a mask, the state
        requeued."""
        with self._lock:  # the index's hook is set and cleared under the automaton's lock
            self.index.yield_when = yield_to
            try:
                if self._advances:
                    self._warm_advance(*self._advances.popleft())
                    return 0
                if self._hot:
                    return self._warm_hot(self._hot.popleft())
                if self.urgent_pending or (urgent is not None and urgent()):
                    raise MaskDeferred  # urgent work came first: not even one row
                self.index.yield_when = self._speculative_pause(yield_to, urgent)
                if self._ahead:
                    return self._warm_ahead(self._ahead.popleft())
                if not self._warm_queue:  # another thread took the last prefetched state
                    return 0
                self._warm_breadth_first(self._warm_queue.popleft(), done)
                return 0
            finally:
                self.index.yield_when = None

    def _speculative_pause(self, yield_to: Callable[[], bool] | None,
                           urgent: Callable[[], bool] | None) -> Callable[[], bool]:
        """The pause point of speculative work: ``yield_to`` (parks while held), then stop
        (True) when urgent work waits, here or queued elsewhere."""
        def pause() -> bool:
            if yield_to is not None and yield_to():
                return True
            return self.urgent_pending or (urgent is not None and urgent())
        return pause

    def _warm_breadth_first(self, state: int, done: dict[int, bytes]) -> None:
        """Compute one mask of the breadth-first order (once per clamped term)."""
        paths = self._warm_paths
        with self._lock:
            key = self.dfa.mask_key(state, self.vocab.max_token_len)
            if key in self._warm_keys:
                return
            try:
                self.mask(state)
            except MaskDeferred:
                self._warm_queue.appendleft(state)  # first again on the next call
                raise
            self._warm_keys.add(key)
            self._notify_mask()
            states, tokens = self.index.successors(state)
        done[state] = paths[state]
        for nxt, tok in zip(states.tolist(), tokens.tolist(), strict=True):
            if nxt not in paths and nxt != DEAD:
                paths[nxt] = paths[state] + (self.vocab.token_bytes[tok] or b"")
                self._warm_queue.append(nxt)

    def _warm_hot(self, state: int) -> int:
        """Compute one prefetched state's mask and closing row (queueing its successors for
        the look-ahead, first); 1 if it computed the mask."""
        with self._lock:
            computed = self._warm_mask(state, self._hot)
            if state in self._failed:
                return computed
            if self.closing_used and not self.closing.row_ready(state):
                self._warm_closing(state)
            states, _ = self.index.successors(state)
            fresh = [s for s in states.tolist()[:_MAX_HOT]
                     if s != DEAD and s not in self.cached_np_masks]
            self._ahead.extendleft(reversed(fresh))  # before older look-ahead: nearer
            while len(self._ahead) > _MAX_HOT:  # the oldest are stale: decoding moved on
                self._ahead.pop()
        return computed

    def _warm_ahead(self, state: int) -> int:
        """Compute one look-ahead state's mask; 1 if computed."""
        with self._lock:
            return self._warm_mask(state, self._ahead)

    def _warm_mask(self, state: int, queue: deque[int]) -> int:
        """Compute ``state``'s mask unless it is cached or failed; 1 if computed. Stopped at
        a pause point, ``state`` goes back to the front of ``queue``; a budget hit is kept
        for that state (see :meth:`mask`) and reported to waiters."""
        if state in self._failed or state in self.cached_np_masks:
            return 0
        try:
            self.mask(state)
        except MaskDeferred:
            queue.appendleft(state)
            raise
        except GrammarError as exc:
            self._failed[state] = exc
            self._notify_mask()
            return 0
        self._notify_mask()
        return 1

    def _warm_closing(self, state: int) -> None:
        """The closing row of ``state`` (a trie walk and distance searches), or only its
        span (the distance searches over the mask walk's successors, when it kept them) where
        the budget prefetched with it cuts nothing."""
        remaining = self._closing_budgets.pop(state, None)
        successors = self.index.cached_successors(state)
        if remaining is not None and successors is not None:  # else the row walks once
            self.closing.span(state, successors)
        # cuts() is None where there is no span either (no successors kept): build the row
        if remaining is None or self.closing.cuts(state, remaining) is not False:
            self.closing.row(state)
        self._notify_mask()

    @property
    def warm_up_pending(self) -> bool:
        """Whether :meth:`warm_up` has states left to visit."""
        return bool(self._warm_queue) or self.prefetch_pending

    @property
    def prefetch_pending(self) -> bool:
        """Whether states asked for by :meth:`prefetch` (or their successors), or advances
        asked for by :meth:`prefetch_advance`, are queued."""
        return self.urgent_pending or bool(self._ahead)

    @property
    def urgent_pending(self) -> bool:
        """Whether work decoding waits for is queued: states asked for by :meth:`prefetch`
        (their masks and closing rows) or advances asked for by :meth:`prefetch_advance`."""
        return bool(self._hot) or bool(self._advances)


_POLITE_SLICE = 0.001  # seconds a background warm-up holds the GIL before offering it
_MAX_HOT = 256  # prefetch queue length, and look-ahead's (successors of one state at most)
