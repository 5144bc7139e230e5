"""The vocabulary's tokens as a byte trie, walked through a DFA one level at a time.

Tokens sharing a byte prefix share the walk of that prefix: a 49k byte-level BPE vocabulary
has ~332k token bytes but ~100k distinct prefixes (trie nodes), Mistral's 131k tekken ~878k
and ~266k. Nodes are stored level by level (level d = prefixes of d bytes); within a level,
children are ordered by parent, so the children of one parent are a contiguous range. A walk
keeps, per level, the DFA state reached at every node (0 = dead): when most parents are alive
it steps the whole level with one gather; otherwise it expands only the live parents' ranges.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from . import trie_walk_kernel


class TokenTrie:
    """Levels of distinct token prefixes, and which tokens end at which node."""

    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        # level d: sorted distinct prefixes of length d; sorting keeps children of one parent
        # contiguous and in parent order
        tokens = sorted({b for b in token_bytes if b})
        self.depth = max((len(b) for b in tokens), default=0)
        levels: list[list[bytes]] = [[b""]]
        for d in range(1, self.depth + 1):
            levels.append(sorted({b[:d] for b in tokens if len(b) >= d}))
        self.parent: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        self.byte: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        self.child_start: list[np.ndarray] = []  # [level d-1 node] -> first child at level d
        self.child_count: list[np.ndarray] = []
        for d in range(1, self.depth + 1):
            where = {p: i for i, p in enumerate(levels[d - 1])}
            parent = np.array([where[p[:-1]] for p in levels[d]], dtype=np.int64)
            self.parent.append(parent)
            self.byte.append(np.array([p[-1] for p in levels[d]], dtype=np.int64))
            count = np.bincount(parent, minlength=len(levels[d - 1]))
            self.child_count.append(count)
            self.child_start.append(np.cumsum(count) - count)
        self.sizes = [len(level) for level in levels]
        # tokens ending at level d: their node there and their ids (duplicates share a node)
        node_of = [{p: i for i, p in enumerate(level)} for level in levels]
        ends: list[list[tuple[int, int]]] = [[] for _ in levels]
        for tid, data in enumerate(token_bytes):
            if data:
                ends[len(data)].append((node_of[len(data)][data], tid))
        self.end_node = [np.array([n for n, _ in e], dtype=np.int64) for e in ends]
        self.end_token = [np.array([t for _, t in e], dtype=np.int64) for e in ends]
        self._flat = self._flatten()
        self._num_tokens = int(self._flat[-1].size)

    def _flatten(self) -> tuple[np.ndarray, ...]:
        """The trie as flat arrays over all nodes (flat index = level offset + index in the
        level) for :func:`trie_walk_kernel.walk_levels`: byte per node, children as a range
        of flat indices, the tokens ending at each node (CSR, ascending token id)."""
        level_off = np.concatenate([[0], np.cumsum(self.sizes)]).astype(np.int64)
        byte = np.concatenate([np.zeros(1, dtype=np.int64), *self.byte[1:]])
        child_start = np.zeros(level_off[-1], dtype=np.int64)
        child_count = np.zeros(level_off[-1], dtype=np.int64)
        for d in range(self.depth):  # level d's children live at level d + 1
            child_start[level_off[d]:level_off[d + 1]] = self.child_start[d] + level_off[d + 1]
            child_count[level_off[d]:level_off[d + 1]] = self.child_count[d]
        end_flat = np.concatenate([e + level_off[d] for d, e in enumerate(self.end_node)])
        end_token = np.concatenate(self.end_token)
        order = np.lexsort((end_token, end_flat))
        tok_off = np.zeros(level_off[-1] + 1, dtype=np.int64)
        np.add.at(tok_off, end_flat + 1, 1)
        return (byte, child_start, child_count, np.cumsum(tok_off),
                end_token[order].astype(np.int64))

    @property
    def num_tokens(self) -> int:
        """Token ids with bytes (duplicates counted): the most one walk can return."""
        return self._num_tokens

    @property
    def num_nodes(self) -> int:
        """Distinct non-empty token prefixes."""
        return sum(self.sizes) - 1

    def walk(self, trans: Callable[[], np.ndarray], state: int,
             ensure_rows: Callable[[np.ndarray], None],
             built: Callable[[], np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
        """(token ids whose bytes lead from ``state`` to a live state, that state).

        ``trans()`` returns the DFA's current ``[num_states, 256]`` table (it may grow while
        rows are built); ``ensure_rows(states)`` builds the rows of the given states. State 0
        is dead and its row is all zeros. With ``built()`` (the DFA's bool per state: row
        built) and the compiled loop loaded (:func:`trie_walk_kernel.ready`), that loop walks.
        """
        if built is not None and trie_walk_kernel.ready():
            return self._walk_native(trans, state, ensure_rows, built)
        return self._walk_numpy(trans, state, ensure_rows)

    def _walk_native(self, trans: Callable[[], np.ndarray], state: int,
                     ensure_rows: Callable[[np.ndarray], None],
                     built: Callable[[], np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
        out_ids = np.empty(self._num_tokens, dtype=np.int64)
        out_states = np.empty(out_ids.size, dtype=np.int32)
        d, n = 1, 0
        nodes, states = np.zeros(1, dtype=np.int64), np.array([state], dtype=np.int32)
        while True:
            d, nodes, states, n, missing = trie_walk_kernel.walk_levels(
                trans(), built(), d, nodes, states, self.depth, *self._flat, out_ids,
                out_states, n)
            if not missing.size:
                return out_ids[:n], out_states[:n]
            ensure_rows(missing)  # distinct, ascending, rowless: the kernel filtered them

    def _walk_numpy(self, trans: Callable[[], np.ndarray], state: int,
                    ensure_rows: Callable[[np.ndarray], None]) -> tuple[np.ndarray, np.ndarray]:
        cur = np.array([state], dtype=np.int32)  # DFA states fit int32 (the table's type)
        ids: list[np.ndarray] = []
        states: list[np.ndarray] = []
        for d in range(1, self.depth + 1):
            alive = np.flatnonzero(cur)
            if not alive.size:
                break
            ensure_rows(cur[alive])
            table = trans()
            parent, byte = self.parent[d], self.byte[d]
            if 2 * alive.size > cur.size:  # dense: one gather over the whole level
                nxt = table[cur[parent], byte]  # 2-D: no index temporaries
            else:  # sparse: only the children of live parents
                count = self.child_count[d - 1][alive]
                total = int(count.sum())
                if not total:
                    break
                first = self.child_start[d - 1][alive]
                idx = np.repeat(first - (np.cumsum(count) - count), count) + np.arange(total)
                nxt = np.zeros(self.sizes[d], dtype=np.int32)
                nxt[idx] = table[cur[parent[idx]], byte[idx]]
            end = nxt[self.end_node[d]]
            ok = end != 0
            if ok.any():
                ids.append(self.end_token[d][ok])
                states.append(end[ok])
            cur = nxt
        if not ids:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int32)
        return np.concatenate(ids), np.concatenate(states)
