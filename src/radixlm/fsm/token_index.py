"""Token-level view of a :class:`LazyDFA`: per-state allowed-token bitmasks, built on first visit.

For a state, every vocabulary token is walked through the byte DFA at once with numpy: tokens
are stored longest first, so at byte position ``i`` the tokens still walking are a prefix of
the arrays, and tokens whose first byte is already dead are dropped before the walk. A state's
bitmask (int32 words, bit t = token t allowed; EOS bits set where the grammar may end) is
cached as a tensor, so repeated visits cost one copy.
"""

from __future__ import annotations

import numpy as np
import torch

from .errors import GrammarBudgetError
from .lazy_dfa import DEAD, LazyDFA
from .vocabulary import TokenVocabulary


class TokenIndex:
    """Allowed tokens and token transitions of a DFA over a vocabulary (lazily, per state)."""

    def __init__(self, dfa: LazyDFA, vocab: TokenVocabulary,
                 max_mask_bytes: int = 1 << 30) -> None:
        self.dfa = dfa
        self.vocab = vocab
        self.max_mask_bytes = max_mask_bytes
        self._masks: dict[int, torch.Tensor] = {}
        self._successors: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def num_masks(self) -> int:
        """States whose mask has been computed."""
        return len(self._masks)

    @property
    def memory_bytes(self) -> int:
        """Bytes held by cached masks."""
        return len(self._masks) * self.vocab.num_words * 4

    def walk_all(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(token ids allowed from ``state``, the state each leads to), ids in walk order."""
        vocab, dfa = self.vocab, self.dfa
        first_row = dfa.row(state)
        keep = np.flatnonzero(first_row[vocab.walk_first] != DEAD)
        if keep.size == 0:
            return keep, keep
        cur = first_row[vocab.walk_first[keep]].astype(np.int64)
        lengths = vocab.walk_lengths[keep]
        mat = vocab.walk_bytes[keep]
        neg_lengths = -lengths  # ascending, for searchsorted
        for i in range(1, int(lengths[0])):
            n = int(np.searchsorted(neg_lengths, -i, side="left"))  # tokens longer than i
            live = cur[:n]
            if not dfa.built[live].all():
                dfa.ensure_rows(live)
            cur[:n] = dfa.trans[live, mat[:n, i]]
        ok = cur != DEAD
        return vocab.walk_ids[keep[ok]], cur[ok]

    def cached_mask(self, state: int) -> torch.Tensor | None:
        """The mask of ``state`` if already computed."""
        return self._masks.get(state)

    def mask(self, state: int) -> torch.Tensor:
        """int32 ``[num_words]`` bitmask of the tokens allowed in ``state`` (cached)."""
        cached = self._masks.get(state)
        if cached is not None:
            return cached
        ids, nxt = self.walk_all(state)
        bits = np.zeros(self.vocab.num_words * 32, dtype=bool)
        bits[ids] = True
        words = np.packbits(bits, bitorder="little").view("<i4").copy()
        if self.dfa.accepting[state]:
            words |= self.vocab.eos_words
        if self.memory_bytes + words.nbytes > self.max_mask_bytes:
            raise GrammarBudgetError("memory", f"{self.max_mask_bytes} bytes",
                                     "cached token masks grew past the limit")
        tensor = torch.from_numpy(words)
        self._masks[state] = tensor
        self._remember_successors(state, ids, nxt)
        return tensor

    def _remember_successors(self, state: int, ids: np.ndarray, nxt: np.ndarray) -> None:
        states, first = np.unique(nxt, return_index=True)
        self._successors[state] = (states, ids[first])

    def install_mask(self, state: int, words: np.ndarray) -> None:
        """Use a mask computed elsewhere (the disk cache) for ``state``."""
        self._masks[state] = torch.from_numpy(np.ascontiguousarray(words, dtype=np.int32))

    def successors(self, state: int) -> tuple[np.ndarray, np.ndarray]:
        """(distinct states reachable with one token, a token id leading to each)."""
        hit = self._successors.get(state)
        if hit is None:
            self.mask(state)
            hit = self._successors.get(state)
            if hit is None:  # mask came from the disk cache
                ids, nxt = self.walk_all(state)
                self._remember_successors(state, ids, nxt)
                hit = self._successors[state]
        return hit

    def next_state(self, state: int, token_id: int) -> int:
        """State after ``token_id`` (:data:`DEAD` if not allowed; EOS is not a text token)."""
        if not 0 <= token_id < self.vocab.vocab_size:
            return DEAD
        data = self.vocab.token_bytes[token_id]
        if data is None:
            return DEAD
        return self.dfa.walk(state, data)
