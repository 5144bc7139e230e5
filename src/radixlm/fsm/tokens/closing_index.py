"""Closing within a token budget: how many tokens still complete an output, per state.

``dist(state)`` is the number of tokens of a completion found from ``state``: a byte path
to an accepting state, found by a best-first search over the automaton's derivative terms
(its states, without building their rows; ordered by the builder's ``search_estimate``, the
shortest match for terms without AND/NOT, so the path is usually the shortest in bytes),
then cut into the fewest vocabulary tokens. So it is an upper
bound on the tokens the shortest completion needs, at most its bytes, usually far fewer (a
JSON key is one or a few tokens). Where the vocabulary cannot cut the path (a byte that is
no token alone nor inside one that fits), a path over the bytes that are single tokens is
searched instead; none found within the search's bound (expanded terms and work steps):
``dist`` None, and the caller cannot promise to close (the request is served without the
promise, and says so; never a wrong cut). Byte-level BPE (GPT-2 style: SmolLM2, Llama 3,
Qwen) and SentencePiece with byte fallback have all 256 single-byte tokens
(:attr:`ClosingIndex.byte_complete`).

Every token boundary on a path found is given its distance along the path (the smaller value
kept), so the cached values keep the invariant the closing mask relies on: a state at
distance ``d > 0`` has a token leading to a state at distance ``<= d - 1``. Hence, with
``remaining`` tokens left and the current state at distance ``<= remaining``, the mask that
keeps only tokens after which the distance is ``<= remaining - 1`` is never empty and never
leads to a dead end.

:class:`ClosingRow` is the per-state table the mask is cut from: the state's allowed tokens
grouped by the distance after them (cumulative bitmasks), computed once per state by walking
the token trie (numpy, :meth:`TokenTrie.walk_pairs`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..automaton.lazy_dfa import DEAD, LazyDFA
from ..automaton.term import FULL_MASK, Term
from ..errors import GrammarError
from .vocabulary import TokenVocabulary

DEFAULT_SEARCH_STATES = 4096  # terms one distance search may expand before giving up
# Work steps (TermBuilder.work_steps: derivative calls, liveness and search expansions) one
# distance search may take before giving up: a bound counted like the compile's, the same on
# any machine. Cost: 0.3-1 us a step on the corpus (SmolLM2, a Zen 4 EPYC core), so at most
# about 0.1-0.25 s for the distance of a state. Handwritten's slowest start state takes 23 k
# steps (allOfPProp10; 1.5 M steps and 2 s when this search built automaton rows, 9.2 M and
# 10 s for allOfPProp4). Past it: ``dist`` None (see module doc).
DEFAULT_SEARCH_STEPS = 250_000


@dataclass(frozen=True)
class ClosingRow:
    """One state's allowed tokens by the distance after them.

    ``levels``: the distinct known distances after a token, ascending; ``words[i]``: int32
    bitmask of the tokens after which the distance is ``<= levels[i]`` (cumulative).
    ``unknown``: some token leads to a state whose distance the search could not bound (such
    tokens are in no ``words``: a mask cut to a budget never allows them).
    """

    levels: tuple[int, ...]
    words: tuple[np.ndarray, ...]
    unknown: bool

    @property
    def widest(self) -> int:
        """The largest distance after any allowed token (-1: none known)."""
        return self.levels[-1] if self.levels else -1

    def allowed(self, limit: int) -> np.ndarray | None:
        """Bitmask of the tokens after which the distance is ``<= limit``; None: none."""
        i = int(np.searchsorted(np.asarray(self.levels), limit, side="right")) - 1
        return self.words[i] if i >= 0 else None


# The row of a state whose token walk hit a budget: closing is not attempted there.
UNCLOSABLE = ClosingRow((), (), True)


class ClosingIndex:
    """Distances to acceptance and closing rows of one automaton over one vocabulary."""

    def __init__(self, dfa: LazyDFA, vocab: TokenVocabulary,
                 max_search_states: int = DEFAULT_SEARCH_STATES,
                 max_search_steps: int = DEFAULT_SEARCH_STEPS) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.max_search_states = max_search_states
        self.max_search_steps = max_search_steps
        self.byte_token = vocab.single_byte_tokens  # bool[256]: the byte is one token
        # the same as a bit mask (bit b = byte b): the bytes of the second search pass
        self._byte_mask = sum(1 << int(b) for b in np.flatnonzero(self.byte_token))
        self._dist: dict[int, int] = {}
        self._unknown: set[int] = set()  # states a search could not bound (within its budget)
        self._tried: set[int] = set()  # states whose search hit a budget (retried when asked)
        self._rows: dict[int, ClosingRow] = {}
        # state -> (widest, unknown) of its row, from the mask walk's distinct successors:
        # enough to tell that a budget cuts nothing without building the row (see span)
        self._spans: dict[int, tuple[int, bool]] = {}
        self._words = 0  # mask rows held by the closing rows

    @property
    def byte_complete(self) -> bool:
        """Every byte is a token: ``dist`` is the fewest bytes to acceptance."""
        return bool(self.byte_token.all())

    def dist(self, state: int) -> int | None:
        """Tokens that surely complete the output from ``state`` (see module doc); None when
        no spellable path was found within the search's bound (or ``state`` is
        dead). Cached per state; builds automaton rows (under the automaton's lock)."""
        if state == DEAD:
            return None
        hit = self._dist.get(state)
        if hit is not None or state in self._unknown:
            return hit
        with self.dfa.lock:
            try:
                return self._search(state)
            except GrammarError:  # the automaton's budget or a deadline: undecided, retried
                self._tried.add(state)
                return None

    def dist_ready(self, state: int) -> bool:
        """Whether :meth:`dist` of ``state`` is a lookup now: computed (a distance, or none
        found within the search's bound), or its search hit a budget (asking again
        searches again)."""
        return state == DEAD or state in self._dist or state in self._unknown or \
            state in self._tried

    def cached_dist(self, state: int) -> int | None:
        """The cached distance of ``state`` (None if not computed or unknown)."""
        return self._dist.get(state)

    def row(self, state: int) -> ClosingRow:
        """The closing row of ``state`` (computed on first use: a trie walk and a distance
        search per distinct successor state)."""
        hit = self._rows.get(state)
        if hit is not None:
            return hit
        with self.dfa.lock:
            row = self._rows.get(state)
            if row is None:
                row = self._compute_row(state)
                self._rows[state] = row
                self._words += len(row.words)
        return row

    @property
    def memory_bytes(self) -> int:
        """Bytes held by the closing rows' masks (counted in the grammar's memory budget)."""
        return self._words * self.vocab.num_words * 4

    def row_ready(self, state: int) -> bool:
        """Whether :meth:`row` of ``state`` is a dict lookup now."""
        return state in self._rows

    def span(self, state: int, successors: np.ndarray) -> tuple[int, bool]:
        """The ``(widest, unknown)`` of ``state``'s row (see :class:`ClosingRow`) from
        ``successors``, the distinct states its allowed tokens lead to (the mask walk's,
        :meth:`TokenIndex.successors`): the largest known distance after a token and whether
        some successor's is unknown. The same values as the row's, at the cost of a distance
        search per successor (cached), without the row's trie walk and bitmasks. Cached."""
        hit = self._spans.get(state)
        if hit is not None:
            return hit
        row = self._rows.get(state)
        if row is not None:
            return row.widest, row.unknown
        dists = [self.dist(int(s)) for s in successors.tolist()]
        known = [d for d in dists if d is not None]
        span = (max(known, default=-1), len(known) < len(dists))
        self._spans[state] = span
        return span

    def cuts(self, state: int, remaining: int) -> bool | None:
        """Whether :meth:`closing_words` of ``state`` with ``remaining`` tokens left may
        cut the mask (then it needs the row); None: not known yet (no row, no span)."""
        row = self._rows.get(state)
        if row is not None:
            return not (row is UNCLOSABLE or (remaining - 1 >= row.widest and not row.unknown))
        span = self._spans.get(state)
        if span is None:
            return None
        return span[1] or remaining - 1 < span[0]

    def closing_words(self, state: int, remaining: int) -> np.ndarray | None:
        """The tokens allowed from ``state`` with ``remaining`` tokens left (this one
        included), or None when the budget removes nothing (every allowed token leaves a
        completion that fits). EOS bits are not included (the caller keeps those of the
        grammar's mask: EOS ends the output, which fits any budget). Where the state's span
        (:meth:`span`) shows that nothing is cut, the row is not built."""
        if self.cuts(state, remaining) is False:
            return None
        row = self.row(state)
        limit = remaining - 1
        # a successor of unknown distance is always cut: from there no budget could be
        # promised (with every byte a token, only a search past its bound leaves one)
        if row is UNCLOSABLE or (limit >= row.widest and not row.unknown):
            return None
        words = row.allowed(limit)
        return words if words is not None else np.zeros(self.vocab.num_words, dtype=np.int32)

    # -- the distance search --------------------------------------------------------------

    def _search(self, start: int) -> int | None:
        """A path from ``start`` to an accepting state (or to a state at a known distance)
        over all bytes, cut into the fewest vocabulary tokens; where the vocabulary cannot
        cut it, a path over the bytes that are single tokens. Records the distance of every
        token boundary on the path (see module doc)."""
        passes = [FULL_MASK] if self.byte_complete else [FULL_MASK, self._byte_mask]
        for allowed in passes:
            found = self._best_first(start, allowed)
            if found is None:
                break
            data, terms, base = found
            cuts = self._fewest_tokens(data)
            if cuts is not None:
                self._record(start, terms, cuts, base)
                return self._dist[start]
        self._unknown.add(start)
        return None

    def _best_first(self, start: int, allowed: int) -> tuple[bytes, list[Term], int] | None:
        """Best-first search over derivative terms, one byte of ``allowed`` (bit b = byte b)
        per derivative class, ordered by the builder's ``search_estimate`` (the shortest match
        for terms without AND/NOT), for a nullable term or one of a state at a known
        distance: the bytes to it, the terms along them (``len(data) + 1``, the start's
        first) and that distance (0 when nullable); None past :attr:`max_search_states`
        expansions or :attr:`max_search_steps` work steps, or when none is reachable.

        Over terms, not automaton rows: a row registers every successor as a state, and
        each successor with an intersection or complement costs a liveness search of its own
        (on the corpus 1-9 M steps, 2-10 s, for one distance). Here a successor is only
        derived and queued; a dead one is never completed, so the path found is live, and
        its terms are marked so (:meth:`_record` registers the states at its cuts for free).
        Each class's derivative is taken on its lowest byte, as :meth:`LazyDFA.build_row`
        does, so the terms are the automaton's states along ``data``."""
        dfa, builder = self.dfa, self.dfa.builder
        state_ids = dfa.state_ids
        first = dfa.term(start)
        parents: dict[int, tuple[Term | None, int]] = {first.uid: (None, -1)}
        heap = [(self._estimate(first), 0, 0, first)]
        pushed = expanded = 0
        steps_limit = builder.work_steps + self.max_search_steps
        while heap:
            _, neg_g, _, u = heapq.heappop(heap)
            base = 0 if u.nullable else self._known(u)
            if base is not None:
                return self._path(u, parents) + (base,)
            expanded += 1
            builder.charge_steps(1)  # the expansion's own work (heap, classes, estimates)
            if expanded > self.max_search_states or builder.work_steps > steps_limit:
                return None
            g = 1 - neg_g
            for mask in builder.classes(u):
                if not mask & allowed:
                    continue
                v = builder.derivative(u, (mask & -mask).bit_length() - 1)
                if v is builder.empty or v.live is False or v.uid in parents:
                    continue
                sid = state_ids.get(v.uid)
                if sid is not None and (sid == DEAD or sid in self._unknown):
                    continue
                parents[v.uid] = (u, ((mask & allowed) & -(mask & allowed)).bit_length() - 1)
                pushed += 1
                est = 0 if v.nullable else self._known(v)
                if est is None:
                    est = builder.search_estimate(v)
                heapq.heappush(heap, (g + est, -g, pushed, v))
        return None

    def _known(self, term: Term) -> int | None:
        """The known distance of ``term``'s state (None: not a state yet, or not known)."""
        sid = self.dfa.state_ids.get(term.uid)
        return None if sid is None else self._dist.get(sid)

    @staticmethod
    def _path(end: Term, parents: dict[int, tuple[Term | None, int]]
              ) -> tuple[bytes, list[Term]]:
        """The bytes from the search's start to ``end`` and the terms along them, every one
        marked live (each reaches ``end``, which is nullable or a live state's)."""
        out, terms = bytearray(), [end]
        node: Term | None = end
        while True:
            node.live = True
            parent, byte = parents[node.uid]
            if parent is None:
                break
            out.append(byte)
            terms.append(parent)
            node = parent
        return bytes(reversed(out)), terms[::-1]

    def _estimate(self, state_term: Term) -> int:
        if state_term.nullable:
            return 0
        return self.dfa.builder.search_estimate(state_term)

    def _fewest_tokens(self, data: bytes) -> list[int] | None:
        """The cut points (0 .. len(data)) of ``data`` into the fewest vocabulary tokens
        (dynamic programming); None when the vocabulary cannot spell it."""
        tokens, longest, n = self.vocab.byte_strings, self.vocab.max_token_len, len(data)
        best = [0] + [n + 1] * n
        back = [-1] * (n + 1)
        for i in range(n):
            if best[i] > n:
                continue
            for j in range(i + 1, min(n, i + longest) + 1):
                if best[i] + 1 < best[j] and data[i:j] in tokens:
                    best[j], back[j] = best[i] + 1, i
        if n and back[n] < 0:
            return None
        cuts = [n]
        while cuts[-1] > 0:
            cuts.append(back[cuts[-1]])
        return cuts[::-1]

    def _record(self, start: int, terms: list[Term], cuts: list[int], base: int) -> None:
        """Give the state at every cut of a path found from ``start`` (``terms``: the terms
        along it, from :meth:`_best_first`) its distance along the path (the tokens after
        the cut, plus ``base`` at the end), keeping smaller values already known. The terms
        are live: registering their states builds no row and searches nothing."""
        tokens_after = len(cuts) - 1
        for k, cut in enumerate(cuts):
            state = start if cut == 0 else self.dfa.state_of(terms[cut])
            d = tokens_after - k + base
            old = self._dist.get(state)
            if old is None or d < old:
                self._dist[state] = d

    # -- closing rows ---------------------------------------------------------------------

    def _compute_row(self, state: int) -> ClosingRow:
        """The row of ``state``; one whose walk hits a budget of the automaton is
        :data:`UNCLOSABLE` (no cut: the caller cannot promise to close from there)."""
        dfa = self.dfa
        try:
            ids, targets = self.vocab.trie.walk_pairs(lambda: dfa.trans, state,
                                                      dfa.ensure_rows)
        except GrammarError:
            return UNCLOSABLE
        if not ids.size:
            return ClosingRow((), (), False)
        distinct, inverse = np.unique(targets, return_inverse=True)
        dists = np.array([_or_inf(self.dist(int(s))) for s in distinct.tolist()],
                         dtype=np.int64)
        per_token = dists[inverse]
        finite = per_token < _INF
        levels = np.unique(per_token[finite])
        words = []
        bits = np.zeros(self.vocab.num_words * 32, dtype=bool)
        order = np.argsort(per_token[finite], kind="stable")
        sorted_ids, sorted_d = ids[finite][order], per_token[finite][order]
        start = 0
        for level in levels.tolist():
            end = int(np.searchsorted(sorted_d, level, side="right"))
            bits[sorted_ids[start:end]] = True
            words.append(np.packbits(bits, bitorder="little").view("<i4").copy())
            start = end
        return ClosingRow(tuple(int(x) for x in levels), tuple(words), bool((~finite).any()))


_INF = 1 << 62


def _or_inf(d: int | None) -> int:
    return _INF if d is None else d

