"""Token-level view of a :class:`LazyDFA`: per-state allowed-token bitmasks, built on first visit.

For a state, every vocabulary token is walked through the byte DFA at once: through the token
trie (:mod:`token_trie`) in most states, and in states where most bytes loop (inside an
unbounded string) with numpy over the tokens stored longest first (at byte position ``i`` the
tokens still walking are a prefix of the arrays; tokens whose first byte is already dead are
dropped before the walk). A state's bitmask (int32 words, bit t = token t allowed; EOS bits set
where the grammar may end) is cached as a tensor, so repeated visits cost one copy.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np
import torch

from ..automaton import work_clock
from ..automaton.lazy_dfa import DEAD, LazyDFA
from ..errors import GrammarBudgetError
from .state_loops import StateLoops
from .token_trie import SeenFlags, TokenTrie, TrieWalk, walk_from_pairs
from .vocabulary import TokenVocabulary


def _subset_of(bytesets: np.ndarray, allowed: np.ndarray) -> np.ndarray:
    """bool per token: every byte of the token is in ``allowed`` (bool[256]).

    ``bytesets`` is [4, n] uint64 (column-major: one contiguous row per 64 bytes).
    """
    outside = ~np.packbits(allowed, bitorder="little").view(np.uint64)  # 4 x 64 bits
    stray = bytesets[0] & outside[0]
    for k in range(1, 4):
        if outside[k]:
            stray |= bytesets[k] & outside[k]
    return stray == 0


# States looping on at least this many bytes take the byte-set shortcut (unbounded strings
# loop on ~200 bytes; structural states on a handful at most).
_LOOPING_BYTES = 128


def mask_steps_error(limit: int | None) -> GrammarBudgetError:
    """The error of a mask that went past ``limit`` work steps (the deterministic budget)."""
    return GrammarBudgetError("mask steps", f"{limit} steps",
                              "computing the allowed tokens of one state took too many "
                              "derivative and liveness steps (raise max_mask_steps)")


class MaskDeferred(Exception):  # noqa: N818 (a signal, not an error)
    """A mask computation stopped at its caller's ``yield_at`` (resumable: the automaton
    rows it built stay)."""


class TokenIndex:
    """Allowed tokens and token transitions of a DFA over a vocabulary (lazily, per state)."""

    def __init__(self, dfa: LazyDFA, vocab: TokenVocabulary,
                 max_mask_bytes: int = 1 << 30, max_mask_seconds: float = float("inf"),
                 max_mask_steps: int | None = None, native_walk: bool = False,
                 short_reach: bool = False) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.max_mask_bytes = max_mask_bytes
        self.max_mask_seconds = max_mask_seconds
        # work steps one mask may take (TermBuilder.work_steps; None: no limit), liveness
        # searches included: a budget counted in steps, the same on any machine, unlike
        # max_mask_seconds (kept only as an outer bound)
        self.max_mask_steps = max_mask_steps
        self.native_walk = native_walk  # the trie walk's compiled loop (trie_walk_kernel)
        # a caller that cannot wait sets this (perf_counter time; under the grammar's lock):
        # past it the walk stops with MaskDeferred, keeping the rows it built for next time
        self.yield_at = float("inf")
        self.yield_terms = 0  # terms when yield_at was set (see _check_budget)
        # a background warm-up sets this (under the grammar's lock): True stops the walk
        # with MaskDeferred at its next automaton row, e.g. once a compile waits for the GIL
        self.yield_when: Callable[[], bool] | None = None
        self._masks: dict[int, torch.Tensor] = {}
        self._np_masks: dict[int, np.ndarray] = {}  # the same buffers as numpy (faster copies)
        self._distinct = 0  # masks actually computed (shared ones counted once)
        self._successors: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self._seen = SeenFlags()  # the compiled trie walk's scratch flags, one per state
        self._loops = StateLoops()  # what loops at each state (the walk's subtree skips)
        # masks are composed of a shared part (tokens up to vocab.short_reach, keyed by the
        # term clamped there) and a per-state walk of the longer tokens (_compose_mask)
        self.short_reach = short_reach and vocab.short_reach < vocab.max_token_len
        self._short_words: dict[int, np.ndarray] = {}  # short key state -> its words

    @property
    def num_masks(self) -> int:
        """States whose mask has been computed."""
        return len(self._masks)

    @property
    def num_distinct_masks(self) -> int:
        """Masks actually computed (states sharing one counted once)."""
        return self._distinct

    @property
    def num_short_masks(self) -> int:
        """Distinct shared parts (tokens up to the short reach) computed so far."""
        return len(self._short_words)

    @property
    def memory_bytes(self) -> int:
        """Bytes held by cached masks (shared ones counted once)."""
        return (self._distinct + len(self._short_words)) * self.vocab.num_words * 4

    def walk_all(self, state: int, deadline: float = float("inf"),
                 steps_limit: int | None = None) -> TrieWalk:
        """The tokens allowed from ``state`` and the states they lead to; ``deadline`` on
        :func:`..automaton.work_clock.now`; ``steps_limit``: the builder's :attr:`work_steps`
        past which the walk fails (default: ``max_mask_steps`` more than now).

        Usually the vocabulary's byte trie is walked through the DFA (tokens sharing a prefix
        share its walk: :mod:`token_trie`). In states where most bytes loop (inside an
        unbounded string), tokens made only of looping bytes are accepted at once from their
        byte sets, and the rest walk byte by byte, longest first, dropping dead tokens.
        """
        vocab, dfa = self.vocab, self.dfa
        if steps_limit is None:
            steps_limit = self.steps_limit()
        dfa.build_row(state)
        self._check_budget(steps_limit, deadline)
        # most states: the trie walk (None where at least _LOOPING_BYTES bytes loop; the
        # check is made in the walk's first call: a cold mask pays per numpy call)
        walk = self._walk_trie(vocab.trie, state, steps_limit, deadline, _LOOPING_BYTES)
        if walk is not None:
            return walk
        row = dfa.trans[state].copy()
        looping = row == state
        first_ok = row[vocab.walk_first] != DEAD
        if looping.any():
            inside = _subset_of(vocab.walk_bytesets, looping) & first_ok
            walking = first_ok & ~inside
        else:
            inside, walking = None, first_ok
        idx = np.flatnonzero(walking)
        cur = row[vocab.walk_first[idx]]
        neg = vocab.walk_neg_lengths[idx]
        for i in range(1, int(-neg[0]) if idx.size else 0):
            n = int(np.searchsorted(neg, -i, side="left"))  # tokens longer than i
            if n == 0:
                break
            live = cur[:n]
            if not dfa.built[live].all():
                dfa.ensure_rows(live)
                self._check_budget(steps_limit, deadline)
            flat = dfa.trans.reshape(-1)
            cur[:n] = flat[live * 256 + vocab.walk_cols[i][idx[:n]]]
            alive = cur != DEAD
            if 2 * int(np.count_nonzero(alive)) < cur.size:  # compact: keeps the order
                idx, cur, neg = idx[alive], cur[alive], neg[alive]
        ok = cur != DEAD
        ids, states = vocab.walk_ids[idx[ok]], cur[ok]
        if inside is not None:
            looped = vocab.walk_ids[inside]
            ids = np.concatenate([ids, looped])
            states = np.concatenate([states, np.full(looped.size, state, dtype=states.dtype)])
        return walk_from_pairs(ids, states, vocab.num_words)

    def _walk_trie(self, trie: TokenTrie, state: int, steps_limit: int, deadline: float,
                   looping_limit: int | None = None) -> TrieWalk | None:
        """``trie``'s tokens allowed from ``state`` and where each leads (rows built as
        needed, within the budget); None where ``state`` loops on at least ``looping_limit``
        bytes (see :meth:`TokenTrie.walk`)."""
        dfa = self.dfa

        def ensure_rows(states: np.ndarray) -> None:
            missing = states[~dfa.built[states]]
            if not missing.size:  # the usual case once a few masks are computed
                return
            # ascending, as np.unique gave (a few us less: missing is usually small)
            for s in sorted(set(missing.tolist())):
                dfa.build_row(s)  # one row at a time: the granularity of yield_at
                self._check_budget(steps_limit, deadline)

        built = (lambda: dfa.built) if self.native_walk else None
        return trie.walk(lambda: dfa.trans, state, ensure_rows, self.vocab.num_words, built,
                         self._seen, self._loops, looping_limit)

    def steps_limit(self) -> int:
        """The builder's :attr:`work_steps` at which a mask started now fails."""
        extra = self.max_mask_steps if self.max_mask_steps is not None else 1 << 62
        return self.dfa.builder.work_steps + extra

    def _check_budget(self, steps_limit: int, deadline: float) -> None:
        if self.dfa.builder.work_steps > steps_limit:
            raise mask_steps_error(self.max_mask_steps)
        if time.perf_counter() > self.yield_at and self.dfa.builder.num_terms > self.yield_terms:
            raise MaskDeferred  # only once this attempt made progress: retries converge
        if self.yield_when is not None and self.yield_when():
            raise MaskDeferred  # the rows built so far stay: the retry resumes
        if work_clock.now() > deadline:  # the budget charges this mask's work, not GC pauses
            raise GrammarBudgetError("mask time", f"{self.max_mask_seconds} s",
                                     "computing the allowed tokens of one state took too long")

    @property
    def masks(self) -> dict[int, torch.Tensor]:
        """The mask cache itself (state -> mask); only ever grows."""
        return self._masks

    @property
    def np_masks(self) -> dict[int, np.ndarray]:
        """state -> the same masks as numpy arrays sharing memory (read without a lock)."""
        return self._np_masks

    def _store(self, state: int, tensor: torch.Tensor) -> None:
        # numpy entry first: a reader that finds the tensor also finds the array
        self._np_masks[state] = tensor.numpy()
        self._masks[state] = tensor

    def cached_mask(self, state: int) -> torch.Tensor | None:
        """The mask of ``state`` if already computed."""
        return self._masks.get(state)

    def mask(self, state: int) -> torch.Tensor:
        """int32 ``[num_words]`` bitmask of the tokens allowed in ``state`` (cached; states
        whose clamped terms coincide share one mask)."""
        cached = self._masks.get(state)
        if cached is not None:
            return cached
        key = self.dfa.mask_key(state, self.vocab.max_token_len)
        shared = self._masks.get(key)
        if shared is not None:
            self._store(state, shared)
            return shared
        if self.short_reach:
            tensor = self._compose_mask(key)
        else:
            tensor = self._compute_mask(key)
        self._store(state, tensor)
        return tensor

    def _compose_mask(self, state: int) -> torch.Tensor:
        """The mask of ``state`` as the shared mask of its tokens up to the vocabulary's
        short reach (keyed by the term clamped at that reach: exact for those tokens, see
        :meth:`TermBuilder.clamp`) plus its own walk of the few longer ones."""
        vocab = self.vocab
        # one budget for both walks, as for one whole walk
        deadline, steps_limit = work_clock.now() + self.max_mask_seconds, self.steps_limit()
        short_key = self.dfa.mask_key(state, vocab.short_reach)
        short = self._short_words.get(short_key)
        if short is None:
            walk = self.walk_all(short_key, deadline, steps_limit)
            self._short_words[short_key] = walk.words & ~vocab.long_words
            self._remember_successors(short_key, walk)  # exact: a whole walk
            if short_key == state:  # no counter between the reaches: that walk is the mask
                return self._finish_mask(state, walk.words)
            short = self._short_words[short_key]
        long = self._walk_trie(vocab.long_trie, state, steps_limit, deadline)
        return self._finish_mask(state, short | long.words)

    def _compute_mask(self, state: int) -> torch.Tensor:
        walk = self.walk_all(state, work_clock.now() + self.max_mask_seconds)
        tensor = self._finish_mask(state, walk.words)
        self._remember_successors(state, walk)
        return tensor

    def _finish_mask(self, state: int, words: np.ndarray) -> torch.Tensor:
        """Store ``words`` (EOS added where ``state`` may end) as the mask of ``state``."""
        if self.dfa.accepting[state]:
            words |= self.vocab.eos_words
        if self.memory_bytes + words.nbytes > self.max_mask_bytes:
            raise GrammarBudgetError("memory", f"{self.max_mask_bytes} bytes",
                                     "cached token masks grew past the limit")
        tensor = torch.from_numpy(words)
        self._store(state, tensor)
        self._distinct += 1
        return tensor

    def _remember_successors(self, state: int, walk: TrieWalk) -> None:
        self._successors[state] = (walk.states, walk.tokens)

    def install_mask(self, state: int, words: np.ndarray) -> None:
        """Use a mask computed elsewhere (the disk cache) for ``state``."""
        self._store(state, torch.from_numpy(np.ascontiguousarray(words, dtype=np.int32)))
        self._distinct += 1

    def successors(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(distinct states reachable with one token, a token id leading to each)."""
        hit = self._successors.get(state)
        if hit is None:
            self.mask(state)
            hit = self._successors.get(state)
            if hit is None:  # mask came from the disk cache
                self._remember_successors(state, self.walk_all(state))
                hit = self._successors[state]
        return hit

    def cached_successors(self, state: int) -> np.ndarray | None:
        """The distinct states one token leads to from ``state`` if its mask walk kept them
        (a state computed under its own mask key), else None (no walk made here)."""
        hit = self._successors.get(state)
        return None if hit is None else hit[0]

    def next_state(self, state: int, token_id: int) -> int:
        """State after ``token_id`` (:data:`DEAD` if not allowed; EOS is not a text token)."""
        if not 0 <= token_id < self.vocab.vocab_size:
            return DEAD
        data = self.vocab.token_bytes[token_id]
        if data is None:
            return DEAD
        return self.dfa.walk(state, data)
