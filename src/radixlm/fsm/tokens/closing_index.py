"""Closing within a token budget: how many tokens still complete an output, per state.

``dist(state)`` is the length of a path of *single-byte tokens* from ``state`` to an
accepting state: an upper bound on the tokens that complete the output from there (a path of
single-byte tokens is a tokenization; longer tokens can only shorten it). Every byte-level BPE
vocabulary (GPT-2 style: SmolLM2, Llama 3, Qwen) and every SentencePiece vocabulary with byte
fallback has a token for each of the 256 bytes, so there the bound is the fewest bytes to an
accepting state. A vocabulary without some single-byte tokens gets paths that avoid those
bytes (longer, or none: ``dist`` None, then the caller cannot promise to close).

The bound is found by a best-first search over the byte automaton (ordered by the builder's
``search_estimate``, exact for terms without AND/NOT), bounded in states; every state on the
path found is given its distance along it, so the cached values keep the invariant the
closing mask relies on: a state at distance ``d > 0`` has a single-byte token leading to a
state at distance ``<= d - 1``. Hence, with ``remaining`` tokens left and the current state at
distance ``<= remaining``, the mask that keeps only tokens after which the distance is
``<= remaining - 1`` is never empty and never leads to a dead end.

:class:`ClosingRow` is the per-state table the mask is cut from: the state's allowed tokens
grouped by the distance after them (cumulative bitmasks), computed once per state by walking
the token trie (numpy, :meth:`TokenTrie.walk_pairs`).
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

import numpy as np

from ..automaton.lazy_dfa import DEAD, LazyDFA
from ..errors import GrammarError
from .vocabulary import TokenVocabulary

DEFAULT_SEARCH_STATES = 4096  # states one distance search may expand before giving up


@dataclass(frozen=True)
class ClosingRow:
    """One state's allowed tokens by the distance after them.

    ``levels``: the distinct known distances after a token, ascending; ``words[i]``: int32
    bitmask of the tokens after which the distance is ``<= levels[i]`` (cumulative).
    ``unknown``: some token leads to a state whose distance the search could not bound (such
    tokens are in no ``words``: a closing mask never allows them).
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


class ClosingIndex:
    """Distances to acceptance and closing rows of one automaton over one vocabulary."""

    def __init__(self, dfa: LazyDFA, vocab: TokenVocabulary,
                 max_search_states: int = DEFAULT_SEARCH_STATES) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.max_search_states = max_search_states
        self.byte_token = vocab.single_byte_tokens  # bool[256]: the byte is one token
        self._bytes = np.flatnonzero(self.byte_token)
        self._dist: dict[int, int] = {}
        self._unknown: set[int] = set()  # states a search could not bound (within its budget)
        self._rows: dict[int, ClosingRow] = {}

    @property
    def byte_complete(self) -> bool:
        """Every byte is a token: ``dist`` is the fewest bytes to acceptance."""
        return bool(self.byte_token.all())

    def dist(self, state: int) -> int | None:
        """Tokens that surely complete the output from ``state`` (see module doc); None when
        no path of single-byte tokens was found within the search budget (or ``state`` is
        dead). Cached per state; builds automaton rows (under the automaton's lock)."""
        if state == DEAD:
            return None
        hit = self._dist.get(state)
        if hit is not None or state in self._unknown:
            return hit
        with self.dfa.lock:
            return self._search(state)

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
        return row

    def row_ready(self, state: int) -> bool:
        """Whether :meth:`row` of ``state`` is a dict lookup now."""
        return state in self._rows

    def closing_words(self, state: int, remaining: int) -> np.ndarray | None:
        """The tokens allowed from ``state`` with ``remaining`` tokens left (this one
        included), or None when the budget removes nothing (every allowed token leaves a
        completion that fits). EOS bits are not included (the caller keeps those of the
        grammar's mask: EOS ends the output, which fits any budget)."""
        row = self.row(state)
        limit = remaining - 1
        if limit >= row.widest and not row.unknown:
            return None
        words = row.allowed(limit)
        return words if words is not None else np.zeros(self.vocab.num_words, dtype=np.int32)

    # -- the distance search --------------------------------------------------------------

    def _search(self, start: int) -> int | None:
        """Best-first search from ``start`` to an accepting state or a state already at a
        known distance; records the distance of every state on the path found."""
        dfa, builder = self.dfa, self.dfa.builder
        known = self._dist
        parents: dict[int, int] = {start: -1}
        depth = {start: 0}
        heap = [(self._estimate(start), 0, 0, start)]
        pushed = expanded = 0
        while heap:
            _, neg_g, _, u = heapq.heappop(heap)
            g = -neg_g
            base = 0 if dfa.accepting[u] else known.get(u)
            if base is not None:
                self._record(u, g + base, parents)
                return known[start]
            expanded += 1
            if expanded > self.max_search_states:
                break
            try:
                row = dfa.row(u)
            except GrammarError:  # the automaton's budget: no path through here
                continue
            targets = np.unique(row[self._bytes])
            for v in targets.tolist():
                if v == DEAD or v in parents or v in self._unknown:
                    continue
                parents[v] = u
                depth[v] = g + 1
                pushed += 1
                est = 0 if dfa.accepting[v] else known.get(v)
                if est is None:
                    est = builder.search_estimate(dfa.term(v))
                heapq.heappush(heap, (g + 1 + est, -(g + 1), pushed, v))
        if not heap:  # the whole reachable closure seen: no path of single-byte tokens
            self._unknown.update(parents)
        else:
            self._unknown.add(start)
        return None

    def _estimate(self, state: int) -> int:
        if self.dfa.accepting[state]:
            return 0
        return self.dfa.builder.search_estimate(self.dfa.term(state))

    def _record(self, end: int, total: int, parents: dict[int, int]) -> None:
        """Give every state on the path from the search's start to ``end`` its distance along
        the path (``total`` at the start), keeping smaller values already known."""
        path = []
        node = end
        while node != -1:
            path.append(node)
            node = parents[node]
        path.reverse()  # start .. end
        for i, s in enumerate(path):
            d = total - i
            if s == end:
                d = 0 if self.dfa.accepting[s] else self._dist.get(s, d)
            old = self._dist.get(s)
            if old is None or d < old:
                self._dist[s] = d

    # -- closing rows ---------------------------------------------------------------------

    def _compute_row(self, state: int) -> ClosingRow:
        dfa = self.dfa

        def ensure_rows(states: np.ndarray) -> None:
            dfa.ensure_rows(states)

        ids, targets = self.vocab.trie.walk_pairs(lambda: dfa.trans, state, ensure_rows)
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

