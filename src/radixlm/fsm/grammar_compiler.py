"""Compile grammar specs into :class:`CompiledGrammar`s: cached, budgeted, off-thread.

``compile`` runs in the caller's thread; ``compile_async`` on a thread of the compile pool
and returns a future, so the scheduler never waits on a slow grammar, and a quick compile
never queues behind a slow one (:mod:`.compile.compile_lanes`: a compile past its quick share
of work yields to the quick ones). Both enforce the :class:`CompileBudget` (work steps,
checked cooperatively, decide; seconds are an outer bound; states and memory are hard
limits, also while decoding) and fail with a :class:`GrammarError` naming the problem.
Results and errors are cached in memory by (spec, vocabulary); warmed-up masks also on disk.

The worker's work (compiles, background warm-up, prefetch) parks while a caller holds it off
the GIL (:meth:`GrammarCompiler.hold_background`, :mod:`.compile.background_hold`): the
scheduler does for the few hundred microseconds it checks and copies a step's masks.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from .compile.background_hold import MAX_PAUSE_SECONDS, BackgroundHold
from .compile.compile_clock import STEPS_PER_SECOND, CompileClock
from .compile.compile_lanes import QUICK_COMPILE_STEPS, CompileLanes, CompileTicket
from .compile.first_token_masks import mask_first_tokens
from .compile.grammar_cache import DiskMaskCache, MemoryCache
from .compile.urgent_work import UrgentWork
from .compiled_grammar import CompiledGrammar, GrammarStats
from .errors import GrammarError
from .grammar_spec import DTYPE_REGEXES, CompileBudget, GrammarSpec
from .grammars.ebnf import EbnfOptions, ebnf_to_node
from .grammars.json import SchemaCompiler
from .grammars.structural_tag import StructuralTag, structural_tag_to_node
from .matcher import GrammarMatcher
from .regex import tree as ra
from .regex.parser import regex_to_node
from .tokens import trie_walk_kernel
from .tokens.vocabulary import TokenVocabulary


def spec_to_node(spec: GrammarSpec, deadline=None) -> tuple[ra.Node, list[str]]:  # noqa: ANN001
    """The regex tree of a spec, with notes (cut recursion, ignored annotations)."""
    if spec.kind == "regex":
        return regex_to_node(spec.value), []
    if spec.kind in DTYPE_REGEXES:
        return regex_to_node(DTYPE_REGEXES[spec.kind]), []
    if spec.kind == "choices":
        return ra.alt(*(ra.lit(c) for c in spec.value)), []
    if spec.kind == "ebnf":
        text, depth = spec.value
        return ebnf_to_node(text, EbnfOptions(max_recursion_depth=depth), deadline), []
    options = spec.limits.schema_options(spec.whitespace, spec.lenient)
    notes: list[str] = []

    def schema_node(schema: object) -> ra.Node:
        compiler = SchemaCompiler(schema, options, deadline)
        node = compiler.compile()
        notes.extend(compiler.notes)
        return node

    if spec.kind == "structural_tag":
        return structural_tag_to_node(StructuralTag.from_value(spec.value), schema_node), notes
    return schema_node(spec.value if spec.kind == "json_schema" else '{"type": "object"}'), notes


class GrammarCompiler:
    """Compiles and caches grammars for one vocabulary.

    ``max_workers``: threads of the background pool (warm-up, prefetch, advances);
    ``compile_workers``: threads of the compile pool (compiles run at once; a quick compile
    queues only behind that many slow ones); ``quick_compile_steps``: the work steps after
    which a compile yields to quicker ones (:mod:`.compile.compile_lanes`).
    """

    def __init__(self, vocab: TokenVocabulary, budget: CompileBudget | None = None,
                 cache_dir: Path | None = None, max_workers: int = 1,
                 memory_cache_size: int = 256,
                 max_background_pause: float = MAX_PAUSE_SECONDS,
                 compile_workers: int = 4,
                 quick_compile_steps: int = QUICK_COMPILE_STEPS) -> None:
        if max_workers < 1:
            raise ValueError(f"max_workers must be >= 1, got {max_workers}")
        if compile_workers < 1:
            raise ValueError(f"compile_workers must be >= 1, got {compile_workers}")
        self.vocab = vocab
        vocab.prepare()  # vocabulary-only work once here, not on the first compile's clock
        self.budget = budget or CompileBudget()
        self.disk = DiskMaskCache(cache_dir) if cache_dir is not None else None
        self._memory = MemoryCache(memory_cache_size)
        self._lock = threading.Lock()
        self._pending: dict[str, Future] = {}
        self._pool = ThreadPoolExecutor(max_workers=max_workers,
                                        thread_name_prefix=_WORKER_PREFIX)
        self._compile_pool = ThreadPoolExecutor(max_workers=compile_workers,
                                                thread_name_prefix=f"{_WORKER_PREFIX}-compile")
        self._local = threading.local()  # .ticket: the lane of the compile on this thread
        self.lanes = CompileLanes(compile_workers, quick_compile_steps)  # quick ones first
        self._closed = False
        # the worker's pause points park on this while a caller holds it (hold_background)
        self.background = BackgroundHold(max_background_pause)
        # the queued jobs decoding waits for: look-ahead and background warm-up give way
        self.urgent = UrgentWork()
        # look-ahead and background warm-up (speculative) park at their pause points while
        # this is held: a scheduler whose forward takes every core holds it for the forward
        # (parks of a millisecond: a parked look-ahead gives way to urgent work at once)
        self.speculative = BackgroundHold(_SPECULATIVE_PARK_SECONDS)
        self._max_speculative_park = max_background_pause
        # the worker's jobs asked for in a quiet hold, handed to it when it ends (held_quietly)
        self._quiet_depth = 0
        self._quiet_jobs: list[tuple[Callable[..., None], tuple]] = []
        self._compiling = 0  # compiles in progress (any thread)
        self._wanted = 0  # compiles asked for and not finished (queued behind a warm-up too)
        self._idle = threading.Event()  # set while none is: background warm-up waits for it
        self._idle.set()
        # numba's loop loaded off every compile's and mask's path (1-3 s): walks use numpy
        # until it is ready (the same masks)
        self._warm_kernel = threading.Thread(
            target=trie_walk_kernel.warm if self.budget.native_trie_walk else lambda: None,
            name="radixlm-numba-warm", daemon=True)
        self._warm_kernel.start()

    def wait_started(self) -> None:
        """Block until the start-up work is done (numba's trie walk loaded, when the budget
        walks natively). Nothing waits for it otherwise (walks use numpy until then); this
        is for a caller that wants the steady state from its first mask (benchmarks, tests)."""
        self._warm_kernel.join()

    def hold_background(self) -> None:
        """Keep the worker off the GIL until :meth:`release_background`: it parks at its next
        pause point (an automaton row of a mask, a mask of a warm-up slice, a deadline check
        of a compile) and resumes where it stopped, the parked time off its budgets. For a
        thread whose next few hundred microseconds must not wait for the GIL; it lends the
        worker the interpreter (release, then hold again) whenever it sleeps, e.g. for a
        mask, so that what it waits for still gets computed. The holder must not compile
        or compute a mask itself meanwhile (a mask's lock may be parked with the worker:
        it would wait up to the park's cap, ``max_background_pause``). Holds nest."""
        self.background.hold()

    def release_background(self) -> None:
        """End one :meth:`hold_background`."""
        self.background.release()

    @contextmanager
    def held_quietly(self) -> Iterator[None]:
        """:meth:`hold_background` for the block, and the worker not woken meanwhile: the
        prefetches asked for in it are queued as usual, but the slice that computes them is
        handed to the worker when the block ends. Waking a worker that would only park costs
        the holder two thread switches and a GIL hand-over for each grammar prefetched (a
        scheduler advancing 16 requests' grammars after a forward: tens of microseconds
        each, and on a shared core the woken thread may run first). Call from one thread."""
        self.hold_background()
        self._quiet_depth += 1
        try:
            yield
        finally:
            self._quiet_depth -= 1
            self.release_background()
            if not self._quiet_depth:
                jobs, self._quiet_jobs = self._quiet_jobs, []
                for fn, args in jobs:
                    self._submit(fn, *args)

    def key(self, spec: GrammarSpec) -> str:
        """Cache key of a spec on this vocabulary."""
        text = f"{spec.cache_key()}|{self.vocab.fingerprint}"
        return hashlib.sha256(text.encode()).hexdigest()[:40]

    def compile(self, spec: GrammarSpec) -> CompiledGrammar:
        """Compile (or fetch from cache) in the calling thread."""
        return self.compile_async(spec, _inline=True).result()

    def compile_async(self, spec: GrammarSpec, _inline: bool = False) -> Future:
        """A future of the compiled grammar (its exception: a :class:`GrammarError`)."""
        key = self.key(spec)
        with self._lock:
            hit = self._memory.get(key)
            if hit is not None:
                return _done(hit)
            pending = self._pending.get(key)
            if pending is not None:
                return pending
            future: Future = Future()
            self._pending[key] = future
            self._wanted += 1
        if _inline:  # on the caller: no lane (it parks for nothing)
            self._run(spec, key, future, None)
        else:  # in the quick lane from now: a slow compile running yields to it at once
            self._compile_pool.submit(self._run, spec, key, future, self.lanes.start())
        return future

    def _run(self, spec: GrammarSpec, key: str, future: Future,
             ticket: CompileTicket | None) -> None:
        with self._lock:
            self._compiling += 1
            self._idle.clear()
        self._local.ticket = ticket  # what _build's pause points report to
        try:
            result: CompiledGrammar | GrammarError = self._build(spec, key)
        except GrammarError as exc:
            _drop_frames(exc)
            result = exc
        except RecursionError:
            result = GrammarError("the grammar is nested too deeply to compile")
        except BaseException as exc:  # never leave a waiter hanging
            with self._lock:
                self._pending.pop(key, None)
            future.set_exception(exc)
            return
        finally:
            self._local.ticket = None
            if ticket is not None:
                self.lanes.finish(ticket)
            with self._lock:
                self._compiling -= 1
                self._wanted -= 1
                if not self._compiling:
                    self._idle.set()
        with self._lock:
            self._memory.put(key, result)
            self._pending.pop(key, None)
        _resolve(future, result)
        if isinstance(result, CompiledGrammar) and self.budget.background_warmup_states:
            self._pool.submit(self._warm_in_background, result,
                              self.budget.background_warmup_states)

    def _warm_in_background(self, grammar: CompiledGrammar, left: int) -> None:
        """Keep computing masks after the compile returned, in short slices so compiles
        queued meanwhile go first (the pool is first in, first out)."""
        self._idle.wait(0.05)  # a compile in another thread goes first (bounded: no stall)
        self.background.point()
        try:
            # a compile asked for meanwhile (running, or queued behind this slice) stops
            # even the mask in progress: at 131k tokens one can take tens of ms
            # so does a queued job that decoding waits for (urgent): it runs first
            done = len(grammar.warm_up(min(left, 16), 0.002, polite=True,
                                       stop=lambda: not self._idle.is_set() or
                                       self.urgent.waiting(),
                                       yield_to=self._park_or_yield,
                                       urgent=self._speculative_pause))
        except GrammarError:
            return  # the matcher reports it if decoding ever gets there
        if grammar.warm_up_pending and left - done > 0 and not self._closed:
            self._pool.submit(self._warm_in_background, grammar, left - done)

    def prefetch(self, matcher: GrammarMatcher, remaining: int | None = None) -> bool:
        """Have the worker compute the mask of ``matcher``'s state and of the states one
        token after it, ahead of the breadth-first warm-up; True when the current mask is
        ready already. Call it after each accepted token, before the model's next forward:
        the masks are then usually computed while the forward runs. Never blocks.
        ``remaining``: the budget the request closes its output within (see
        :meth:`GrammarMatcher.prefetch`).
        """
        ready = matcher.prefetch(remaining)
        self._schedule_prefetch(matcher.grammar)
        return ready

    def prefetch_advance(self, matcher: GrammarMatcher, token_id: int) -> None:
        """Have the worker build what advancing ``matcher`` by ``token_id`` needs (automaton
        rows, a mask at an accepting state, the forced run after it), before any mask: a
        scheduler that deferred the advance waits for it (:meth:`GrammarMatcher.advance_ready`).
        Never blocks."""
        matcher.prefetch_advance(token_id)
        self._schedule_prefetch(matcher.grammar)

    def _schedule_prefetch(self, grammar: CompiledGrammar) -> None:
        if not grammar.prefetch_scheduled and not self._closed:
            grammar.prefetch_scheduled = True
            self.urgent.slice_queued(grammar)
            self._queue(self._prefetch_in_background, grammar)

    def prefetch_closing_dist(self, grammar: CompiledGrammar, state: int) -> None:
        """Have the worker compute the closing distance of ``state`` (a search over the
        automaton, building rows: :meth:`ClosingIndex.dist`), for a scheduler that deferred
        the budget check of a jump-forward ending there. Never blocks."""
        self.urgent.call_queued()
        self._queue(self._closing_dist_in_background, grammar, state)

    def _closing_dist_in_background(self, grammar: CompiledGrammar, state: int) -> None:
        self.urgent.call_started()
        self.background.point()
        grammar.warm_closing_dist(state)

    def run_in_background(self, fn: Callable[..., None], *args: object) -> None:
        """Hand ``fn(*args)`` to the worker, behind what is queued already (in a quiet hold,
        when the hold ends: :meth:`held_quietly`); it parks first while a hold is in force.
        For work a decoding caller needs soon and would rather not do itself (a scheduler's
        jump-forward plan). Never blocks."""
        self.urgent.call_queued()
        self._queue(self._parked_call, fn, args)

    def _parked_call(self, fn: Callable[..., None], args: tuple) -> None:
        self.urgent.call_started()
        self.background.point()
        fn(*args)

    def _queue(self, fn: Callable[..., None], *args: object) -> None:
        """Hand ``fn(*args)`` to the worker, or when a quiet hold ends (held_quietly)."""
        if self._quiet_depth:
            self._quiet_jobs.append((fn, args))
        else:
            self._submit(fn, *args)

    def _submit(self, fn: Callable[..., None], *args: object) -> None:
        if not self._closed:
            self._pool.submit(fn, *args)

    def _prefetch_in_background(self, grammar: CompiledGrammar) -> None:
        """A prefetch slice: the grammar's urgent work (deferred advances, prefetched states),
        then its look-ahead, which gives way (requeued behind them) to the jobs decoding
        waits for (:mod:`.compile.urgent_work`); all of it to a compile."""
        self.urgent.slice_started(grammar)
        grammar.prefetch_scheduled = False  # prefetches from now on queue another slice

        def give_way() -> bool:
            return not self._idle.is_set() or (not grammar.urgent_pending and
                                               self.urgent.waiting())

        while grammar.prefetch_pending:  # bounded: depth 1 after each prefetched state
            self.background.point()
            try:
                grammar.warm_up(_PREFETCH_SLICE, float("inf"), polite=True, stop=give_way,
                                yield_to=self._park, prefetched_only=True,
                                urgent=self._speculative_pause)
            except GrammarError:
                return  # the matcher reports it if decoding ever gets there
            if give_way():  # a compile, or a job decoding waits for, goes first
                if grammar.prefetch_pending and not grammar.prefetch_scheduled:
                    grammar.prefetch_scheduled = True
                    self.urgent.slice_queued(grammar)
                    self._pool.submit(self._prefetch_in_background, grammar)
                return

    def _park(self) -> bool:
        """A pause point inside a mask the worker computes: park while held; never stops
        the mask (False: a prefetched mask is what decoding waits for)."""
        self.background.point()
        return False

    def _speculative_pause(self) -> bool:
        """A pause point of speculative work (look-ahead, breadth first): park while the
        :attr:`speculative` hold is in force (at most ``max_background_pause``, as a
        background park), then stop it (True) when a job decoding waits for is queued
        (:mod:`.compile.urgent_work`), at once if one is queued while it is parked: the
        urgent job must not wait for the hold's end (a scheduler's step, waiting for it)."""
        end = time.perf_counter() + self._max_speculative_park
        while self.speculative.held and not self.urgent.waiting() and not self._closed \
                and time.perf_counter() < end:
            self.speculative.point()
        return self.urgent.waiting()

    def _park_or_yield(self) -> bool:
        """A pause point inside a background warm-up mask: park while held, then stop the
        mask (True) when a compile was asked for meanwhile."""
        self.background.point()
        return self._wanted > 0

    def _build(self, spec: GrammarSpec, key: str) -> CompiledGrammar:
        """The compile itself. On a worker (a lane's ticket set by :meth:`_run`) its deadline
        checks are pause points: a hold, quicker compiles; an inline compile runs on its
        caller, maybe the holder, and never parks."""
        ticket: CompileTicket | None = getattr(self._local, "ticket", None)
        start = time.perf_counter()

        def pause(clock: CompileClock) -> None:
            self.background.point()
            self.lanes.pause(ticket, clock)

        deadline = CompileClock(self.budget.max_compile_steps, self.budget.max_seconds,
                                pause if ticket is not None else None)
        node, notes = spec_to_node(spec, deadline)
        schema_seconds = time.perf_counter() - start
        stats = GrammarStats(schema_seconds=schema_seconds, notes=notes)
        try:
            grammar = CompiledGrammar(spec, node, self.vocab, self.budget, stats, deadline)
            cached = self.disk.load(key) if self.disk is not None else []
            yield_to = self._park if ticket is not None else None
            try:
                if cached:
                    grammar.install_masks(cached)
                warmed = self._warm_at_compile(grammar, yield_to)
            finally:
                grammar.dfa.builder.deadline = None  # the compile is over: no longer its clock
        except GrammarError:
            deadline.release()  # refused: its automaton is freed now, not by the collector
            raise
        if self.budget.warmup_states:
            # part of the warm-up: the tokens its shortest output needs (admission checks
            # max_new_tokens against it), here on the worker rather than on the scheduler's
            # thread (a bounded search; without warm-up, computed on first use)
            grammar.closing.dist(grammar.initial_state)
        if self.disk is not None and not cached:
            self.disk.store(key, [(path, grammar.mask(s).numpy()) for s, path in warmed.items()])
        stats.compile_seconds = time.perf_counter() - start
        return grammar

    def _warm_at_compile(self, grammar: CompiledGrammar,
                         yield_to: Callable[[], bool] | None) -> dict[int, bytes]:
        """The compile's warm-up, one mask at a time, breadth first: up to ``warmup_states``
        masks while its work stays within ``warmup_seconds`` of steps
        (:data:`.compile.compile_clock.STEPS_PER_SECOND`, each mask charged at least
        :data:`_MASK_WALK_STEPS` for its trie walk). Counted in steps, not on the clock: a
        mask the warm-up reaches can refuse the compile (a budget, an unspellable state), so
        how many it reaches must not depend on the machine's speed. Then, with
        ``first_token_masks``, every mask one token after the start
        (:func:`.compile.first_token_masks.mask_first_tokens`)."""
        warmed: dict[int, bytes] = {}
        if not self.budget.warmup_states:
            return warmed
        builder = grammar.dfa.builder
        allowance = self.budget.warmup_seconds * STEPS_PER_SECOND
        start, masks = builder.work_steps, 0
        while len(warmed) < self.budget.warmup_states and grammar.warm_up_pending:
            if masks and builder.work_steps - start + masks * _MASK_WALK_STEPS > allowance:
                break
            got = grammar.warm_up(1, float("inf"), yield_to=yield_to)
            if not got:
                break
            warmed.update(got)
            masks += 1
        if self.budget.first_token_masks:  # decides the compile: never stopped by yield_to
            warmed.update(mask_first_tokens(grammar))
        return warmed

    def shutdown(self) -> None:
        """Stop the worker threads (pending compiles finish first)."""
        self._closed = True
        self._compile_pool.shutdown(wait=True)
        self._pool.shutdown(wait=True)


_WORKER_PREFIX = "radixlm-grammar"  # the worker threads' names (only they park)
# a compile's warm-up charges each mask at least this many steps: the trie walk's own work
# (about a millisecond at 49k tokens), which no derivative counts
_MASK_WALK_STEPS = 1_000
_SPECULATIVE_PARK_SECONDS = 0.001  # one park of speculative work: then urgent work is checked
_PREFETCH_SLICE = 8  # masks per warm-up call of a prefetch (a compile may cut in between)


def _drop_frames(exc: BaseException) -> None:
    """Drop the tracebacks of ``exc`` and of the exceptions it chains: a refusal is cached
    (and handed to every waiter) for its message, and its frames held the refused compile's
    automaton alive as long as the cache kept it."""
    seen: set[int] = set()
    node: BaseException | None = exc
    while node is not None and id(node) not in seen:
        seen.add(id(node))
        node.__traceback__ = None
        node = node.__cause__ or node.__context__


def _done(result: CompiledGrammar | GrammarError) -> Future:
    future: Future = Future()
    _resolve(future, result)
    return future


def _resolve(future: Future, result: CompiledGrammar | GrammarError) -> None:
    if isinstance(result, GrammarError):
        future.set_exception(result)
    else:
        future.set_result(result)
