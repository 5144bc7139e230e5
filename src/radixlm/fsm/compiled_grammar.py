"""A compiled grammar: the lazy byte automaton, its token masks and jump-forward runs.

Built by :class:`GrammarCompiler`; shared by every request with the same spec; what the
compiler's worker computes ahead of decoding (prefetch, advances, warm-up) is its base,
:class:`~radixlm.fsm.compile.warm_up.GrammarWarmUp`. Work that
grows the automaton (new states, new masks) happens under a lock, so matchers on several
threads stay consistent; the common path (a cached mask, a walk through built rows) takes no
lock.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from .automaton import work_clock
from .automaton.compressed_fsm import CompressedFSM
from .automaton.derivatives import TermBuilder
from .automaton.lazy_dfa import DEAD, LazyDFA, check_satisfiable
from .compile.compile_clock import CompileClock
from .compile.warm_up import GrammarWarmUp
from .errors import GrammarBudgetError, GrammarError
from .grammar_spec import CompileBudget, GrammarSpec
from .matcher import GrammarMatcher
from .regex import tree as ra
from .tokens.closing_index import ClosingIndex
from .tokens.token_index import MaskDeferred, TokenIndex, mask_steps_error
from .tokens.vocabulary import TokenVocabulary


@dataclass
class MaskWaits:
    """Masks a caller had to compute itself because no warm-up had (the critical path)."""

    count: int = 0  # fills that found no mask ready
    seconds: float = 0.0  # time those fills spent (computing, or trying to)
    max_seconds: float = 0.0
    deferred: int = 0  # of them: gave up at their bound (the caller skips the row a step)

    def add(self, seconds: float, deferred: bool = False) -> None:
        """Record one fill that found no mask ready and took ``seconds``."""
        self.count += 1
        self.deferred += deferred
        self.seconds += seconds
        self.max_seconds = max(self.max_seconds, seconds)


@dataclass
class GrammarStats:
    """What compiling cost and produced."""

    compile_seconds: float = 0.0
    schema_seconds: float = 0.0
    warmup_states: int = 0
    notes: list[str] = field(default_factory=list)


class CompiledGrammar(GrammarWarmUp):
    """The automaton of one :class:`GrammarSpec` over one vocabulary."""

    def __init__(self, spec: GrammarSpec, node: ra.Node, vocab: TokenVocabulary,
                 budget: CompileBudget, stats: GrammarStats,
                 deadline: Callable[[], None] | None = None) -> None:
        self.spec = spec
        self.node = node
        self.vocab = vocab
        self.budget = budget
        self.stats = stats
        self.eos_ids = frozenset(vocab.eos_token_ids)
        self.eos_mask = torch.from_numpy(vocab.eos_words.copy())
        builder = TermBuilder()
        if isinstance(deadline, CompileClock):
            deadline.track(builder)  # the compile's step budget counts this automaton's work
        builder.deadline = deadline  # the compile's, for liveness searches until it returns
        self.dfa = LazyDFA(builder, builder.lower(node), max_states=budget.max_states)
        check_satisfiable(self.dfa)
        self.index = TokenIndex(self.dfa, vocab, max_mask_bytes=budget.max_memory_bytes,
                                max_mask_seconds=budget.max_mask_seconds,
                                max_mask_steps=budget.max_mask_steps,
                                native_walk=budget.native_trie_walk,
                                short_reach=budget.short_reach_masks)
        self.cached_masks = self.index.masks  # state -> mask, read without a lock
        self.cached_np_masks = self.index.np_masks  # the same masks as numpy arrays
        self.compressed = CompressedFSM(self.dfa)
        # tokens still needed to complete an output, per state, and the masks that close an
        # output within a token budget (built on first use)
        self.closing = ClosingIndex(self.dfa, vocab)
        self._lock = self.dfa.lock  # one lock for the automaton, its terms and masks
        self._regex: str | None = None
        self.waits = MaskWaits()  # filled by matchers when a mask was not ready
        self._init_warm_up()

    @property
    def initial_state(self) -> int:
        """The start state."""
        return self.dfa.initial

    @property
    def regex(self) -> str:
        """The regex this grammar enforces (rendered on first use; may be large)."""
        if self._regex is None:
            self._regex = ra.render(self.node)
        return self._regex

    def new_matcher(self) -> GrammarMatcher:
        """A matcher at the start of the grammar."""
        return GrammarMatcher(self)

    def mask(self, state: int) -> torch.Tensor:
        """Cached int32 bitmask of ``state`` (computed on first visit).

        Raises :class:`GrammarError` for a non-final state no token can continue (the
        vocabulary cannot spell what the grammar requires there) rather than returning an
        empty mask.
        """
        cached = self.index.cached_mask(state)
        if cached is not None:
            return cached
        failed = self._failed.get(state)
        if failed is not None:
            raise failed
        with self._lock:
            builder = self.dfa.builder
            outer = builder.deadline
            # a liveness search inside this mask stops at the mask budget (steps; seconds
            # as the outer bound), not after its whole state budget; the compile's own
            # deadline resumes afterwards
            mask_deadline = make_mask_deadline(builder, self.index.steps_limit(), self.budget)
            if not isinstance(outer, CompileClock):
                builder.deadline = mask_deadline
                try:
                    mask = self.index.mask(state)
                finally:
                    builder.deadline = outer
            else:
                mask = self._mask_in_compile(state, mask_deadline, outer)
        return self._checked(state, mask)

    def _mask_in_compile(self, state: int, mask_deadline: Callable[[], None],
                         clock: CompileClock) -> torch.Tensor:
        """A mask computed while compiling: within the mask's budget and what is left of
        the compile's (a mask past the latter refuses the compile, by the compile's name)."""
        builder, index = self.dfa.builder, self.index
        own = index.max_mask_steps
        left = clock.steps_left()
        if left is not None:
            index.max_mask_steps = max(1, left if own is None else min(own, left))

        def both() -> None:
            mask_deadline()
            clock.check_steps()

        builder.deadline = both
        try:
            return index.mask(state)
        except GrammarBudgetError:
            if clock.exhausted():
                raise clock.steps_error() from None
            raise
        finally:
            builder.deadline = clock
            index.max_mask_steps = own

    def mask_within(self, state: int, seconds: float) -> torch.Tensor | None:
        """The mask of ``state`` if it is cached or can be computed within about ``seconds``
        (one automaton row past it at most); None otherwise. The work done is kept, so
        calling again (next step) resumes; the background warm-up may also finish it.
        """
        cached = self.index.cached_mask(state)
        if cached is not None:
            return cached
        if not self._lock.acquire(timeout=seconds):  # the warm-up holds it: try next step
            return None
        try:
            self.index.yield_at = time.perf_counter() + seconds
            self.index.yield_terms = self.dfa.builder.num_terms
            mask = self.index.mask(state)
        except MaskDeferred:
            return None
        finally:
            self.index.yield_at = float("inf")
            self._lock.release()
        return self._checked(state, mask)

    def _checked(self, state: int, mask: torch.Tensor) -> torch.Tensor:
        self._check_memory()
        if not self.dfa.accepting[state] and not mask.numpy().any():
            raise GrammarError("no token of the vocabulary can continue the grammar at a "
                               "reachable point (the required bytes are not spellable)")
        return mask

    def next_state(self, state: int, token_id: int) -> int:
        """State after a text token (DEAD if not allowed). Through rows already built it
        takes no lock (the worker may hold it for a whole mask); otherwise it builds them."""
        data = self._token_data(token_id)
        if data is None:
            return DEAD
        nxt = self.dfa.walk_built(state, data)
        if nxt is not None:
            return nxt
        with self._lock:
            return self.index.next_state(state, token_id)

    def closing_dist_ready(self, state: int) -> bool:
        """Whether the closing distance of ``state`` (:meth:`ClosingIndex.dist`) is a
        lookup now: no search, no lock."""
        return self.closing.dist_ready(state)

    def warm_closing_dist(self, state: int) -> None:
        """Compute the closing distance of ``state`` (the compiler's worker, for a scheduler
        that deferred a jump-forward's budget check) and wake those waiting for it."""
        try:
            self.closing.dist(state)
        finally:
            self._notify_mask()

    def wait_closing_dist(self, state: int, seconds: float) -> bool:
        """Sleep (the GIL released) until :meth:`closing_dist_ready`, at most about
        ``seconds``; True when ready. Computes nothing itself."""
        if self.closing_dist_ready(state):
            return True
        if seconds <= 0:
            return False
        with self._mask_added:
            return self._mask_added.wait_for(lambda: self.closing_dist_ready(state), seconds)

    def _token_data(self, token_id: int) -> bytes | None:
        if not 0 <= token_id < self.vocab.vocab_size:
            return None
        return self.vocab.token_bytes[token_id]

    def has_text_continuation(self, state: int) -> bool:
        """Whether some text token is allowed in ``state``."""
        mask = self.mask(state)
        words = mask.numpy()
        return bool(np.any(words & ~self.vocab.eos_words))

    def _check_memory(self) -> None:
        used = self.dfa.memory_bytes + self.index.memory_bytes + self.closing.memory_bytes
        if used > self.budget.max_memory_bytes:
            raise GrammarBudgetError("memory", f"{self.budget.max_memory_bytes} bytes",
                                     f"the automaton and its masks use {used} bytes")

    def install_masks(self, entries: list[tuple[bytes, np.ndarray]]) -> None:
        """Install cached masks (byte path from the start, mask words)."""
        with self._lock:
            for path, words in entries:
                state = self.dfa.walk(self.initial_state, path)
                if state != DEAD and words.shape == (self.vocab.num_words,):
                    self.index.install_mask(state, words)




def make_deadline(seconds: float, what: str) -> Callable[[], None]:
    """A callable raising :class:`GrammarBudgetError` once ``seconds`` have passed."""
    end = work_clock.now() + seconds  # GC pauses are not the grammar's work

    def check() -> None:
        if work_clock.now() > end:
            raise GrammarBudgetError("time", f"{seconds} s", f"{what} took too long")

    return check


def make_mask_deadline(builder: TermBuilder, steps_limit: int, budget: CompileBudget
                       ) -> Callable[[], None]:
    """The deadline of one mask's liveness searches: past ``steps_limit`` work steps of
    ``builder`` (:attr:`TermBuilder.work_steps`, the deterministic budget), or past
    ``budget.max_mask_seconds`` (the outer wall-clock bound), raise
    :class:`GrammarBudgetError`."""
    wall = make_deadline(budget.max_mask_seconds, "computing the allowed tokens of one state")

    def check() -> None:
        if builder.work_steps > steps_limit:
            raise mask_steps_error(budget.max_mask_steps)
        wall()

    return check
