"""The vocabulary's tokens as a byte trie, walked through a DFA.

Tokens sharing a byte prefix share the walk of that prefix: a 49k byte-level BPE vocabulary
has ~332k token bytes but ~100k distinct prefixes (trie nodes), Mistral's 131k tekken ~878k
and ~266k. Nodes are stored twice. Level by level (level d = prefixes of d bytes; within a
level, children ordered by parent, so the children of one parent are a contiguous range), for
the numpy walk: it keeps, per level, the DFA state reached at every node (0 = dead), stepping
the whole level with one gather when most parents are alive and only the live parents' ranges
otherwise. And in depth-first preorder (a node's subtree is the range after it), for the
compiled loop (:mod:`trie_walk_kernel`), which reads the nodes front to back and jumps over
dead subtrees and accepts subtrees that loop at a state without walking them (their
summaries: :mod:`subtree_summary`).

A walk's result is a :class:`TrieWalk`: the allowed tokens as bitmask words and the distinct
states they reach, one token reaching each.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from . import trie_walk_kernel as kernel
from .state_loops import StateLoops
from .subtree_summary import SubtreeSummary, summarize, whole_chars_from

# A walk from a state with at least this many live printable ASCII bytes (of 95; a string's
# body: ~93) starts from every token allowed (trie_walk_kernel's preset); others from none.
_PRESET_LIVE_BYTES = 64
# A walk from a state with at most this many live bytes walks only their subtrees.
_ROOT_WALK_BYTES = 16


@dataclass(frozen=True)
class TrieWalk:
    """What a walk from one DFA state found."""

    words: np.ndarray  # int32 [num_words]: bit t set = token t reaches a live state
    states: np.ndarray  # int32 [k]: the distinct live states tokens reach, ascending
    tokens: np.ndarray  # int64 [k]: a token reaching each of ``states``


def walk_from_pairs(ids: np.ndarray, states: np.ndarray, num_words: int) -> TrieWalk:
    """The :class:`TrieWalk` of (token id, state it reaches) pairs (every state live)."""
    bits = np.zeros(num_words * 32, dtype=bool)
    bits[ids] = True
    words = np.packbits(bits, bitorder="little").view("<i4").copy()
    if not states.size:
        return TrieWalk(words, np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int64))
    # O(n), no sort: any token of a state is a valid witness, so whichever write wins is right
    present = np.zeros(int(states.max()) + 1, dtype=bool)
    witness = np.zeros(present.size, dtype=np.int64)
    present[states] = True
    witness[states] = ids
    distinct = np.flatnonzero(present).astype(np.int32)
    return TrieWalk(words, distinct, witness[distinct])


class SeenFlags:
    """A walk's per-state scratch flags (uint8 [capacity]; between walks all clear but the
    dead state's, which the walk keeps set), kept by the owner of one DFA so a walk costs
    nothing per state of the automaton."""

    def __init__(self) -> None:
        self.flags = np.zeros(64, dtype=np.uint8)

    def at_least(self, capacity: int) -> np.ndarray:
        """The flags, grown (clear) to at least ``capacity`` states; the current marks kept."""
        if self.flags.size < capacity:
            grown = np.zeros(max(capacity, 2 * self.flags.size), dtype=np.uint8)
            grown[: self.flags.size] = self.flags
            self.flags = grown
        return self.flags


class TokenTrie:
    """Levels of distinct token prefixes, and which tokens end at which node."""

    def __init__(self, token_bytes: Sequence[bytes | None]) -> None:
        # Sorted, a token's new prefixes (nodes) are those past what it shares with the token
        # before it (lcp), and each level's nodes come out sorted, so children of one parent
        # are contiguous and in parent order; numpy per level, no per-prefix Python objects.
        uniq = sorted({b for b in token_bytes if b})
        lens = np.array([len(b) for b in uniq], dtype=np.int64)
        self.depth = int(lens.max(initial=0))
        flat = np.frombuffer(b"".join(uniq), dtype=np.uint8)
        cols = np.full((len(uniq), self.depth), -1, dtype=np.int16)  # -1: past the end
        cols[np.repeat(np.arange(len(uniq)), lens),
             np.arange(flat.size) - np.repeat(np.cumsum(lens) - lens, lens)] = flat
        lcp = np.zeros(len(uniq), dtype=np.int64)  # distinct: they differ within both lengths
        if len(uniq) > 1:
            lcp[1:] = np.argmax(cols[1:] != cols[:-1], axis=1)
        makers = [np.zeros(1, dtype=np.int64)]  # level d: the sorted token making each node
        # the level arrays are kept for the numpy walk (walk_pairs): int32, half of int64's
        # memory (node indices and bytes fit; the scheduler's RSS, issue 40)
        self.parent: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]
        self.byte: list[np.ndarray] = [np.zeros(0, dtype=np.int32)]
        self.child_start: list[np.ndarray] = []  # [level d-1 node] -> first child at level d
        self.child_count: list[np.ndarray] = []
        for d in range(1, self.depth + 1):
            made = np.flatnonzero((lcp < d) & (lens >= d))
            # the parent: the last level d-1 node made at or before (the prefix block's first)
            parent = np.searchsorted(makers[d - 1], made, side="right") - 1
            makers.append(made)
            self.parent.append(parent.astype(np.int32))
            self.byte.append(cols[made, d - 1].astype(np.int32))
            count = np.bincount(parent, minlength=makers[d - 1].size)
            self.child_count.append(count.astype(np.int32))
            self.child_start.append((np.cumsum(count) - count).astype(np.int32))
        self.sizes = [m.size for m in makers]
        # tokens ending at level d, by id: their node there (a token makes its own last node;
        # duplicates share it) and their ids
        rank = {b: i for i, b in enumerate(uniq)}
        tids = np.array([t for t, b in enumerate(token_bytes) if b], dtype=np.int64)
        pos = np.array([rank[token_bytes[t]] for t in tids.tolist()], dtype=np.int64)
        ends = lens[pos]
        self.end_node = [np.zeros(0, dtype=np.int32)]
        self.end_token = [np.zeros(0, dtype=np.int32)]
        for d in range(1, self.depth + 1):
            here = ends == d
            self.end_node.append(np.searchsorted(makers[d], pos[here]).astype(np.int32))
            self.end_token.append(tids[here].astype(np.int32))
        self._num_tokens = sum(e.size for e in self.end_token)
        # per level, the nodes some token through which is not whole UTF-8 characters from
        # the node's byte on (for the subtree summaries)
        whole = whole_chars_from(cols)
        broken = [np.zeros(0, dtype=np.int64)]
        for d in range(1, self.depth + 1):
            rows = np.flatnonzero((lens >= d) & ~whole[:, d - 1])
            broken.append(np.searchsorted(makers[d], rows, side="right") - 1)
        del whole, cols
        self.preorder, self.summary = self._preorder(broken)
        self._all_words_cache: dict[int, np.ndarray] = {}  # see _all_words
        # per first byte, its subtree's preorder range (None: no token starts with it)
        self._root_ranges: list[tuple[int, int] | None] = [None] * 256
        # the same as one array for the C mask walk: per first byte its node, -1 none
        self._roots = np.full(256, -1, dtype=np.int32)
        skip = self.preorder[2]
        for node in np.flatnonzero(self.preorder[1] == 1).tolist():
            self._root_ranges[int(self.preorder[0][node])] = (node, int(skip[node]))
            self._roots[int(self.preorder[0][node])] = node
        summary = self.summary  # the arrays every walk passes, in the loop's order
        self._walk_arrays = (*self.preorder, summary.ascii_bytes, summary.flags, summary.tokens,
                             summary.token_start, summary.chars_before, summary.max_chars,
                             summary.token_chars, summary.wide_chars)

    def _preorder(self, broken: list[np.ndarray]) -> tuple[tuple[np.ndarray, ...],
                                                           SubtreeSummary]:
        """The non-root nodes in depth-first preorder, for :func:`trie_walk_kernel.
        walk_preorder`: (byte, depth, index past the subtree, the token ending there or -1,
        CSR offsets and ids of more tokens with the same bytes), and the nodes' subtree
        summaries (:mod:`subtree_summary`; ``broken``: see there). A node's position is its
        parent's plus one plus the subtree sizes of its earlier siblings (children are
        ordered by byte within their parent, so this is the sorted order of the prefixes);
        subtree sizes are summed up level by level."""
        size = [np.ones(count, dtype=np.int64) for count in self.sizes]
        for d in range(self.depth, 1, -1):
            np.add.at(size[d - 1], self.parent[d], size[d])
        where = [np.full(1, -1, dtype=np.int64)]  # (level, index) -> position; the root -1
        for d in range(1, self.depth + 1):
            before = np.cumsum(size[d]) - size[d]  # sizes of the level's earlier nodes
            first = self.child_start[d - 1][self.parent[d]]  # the parent's first child
            where.append(where[d - 1][self.parent[d]] + 1 + before - before[first])
        n = self.num_nodes
        byte = np.zeros(n, dtype=kernel.NODE_BYTE)
        depth = np.zeros(n, dtype=kernel.NODE_DEPTH)
        skip = np.zeros(n, dtype=kernel.NODE_INDEX)
        for d in range(1, self.depth + 1):
            byte[where[d]], depth[where[d]] = self.byte[d], d
            skip[where[d]] = where[d] + size[d]
        # tokens by node (ascending id within one): the first is the node's, the rest extra
        node = np.concatenate([np.zeros(0, np.int64)] + [where[d][self.end_node[d]]
                                                         for d in range(1, self.depth + 1)])
        tid = np.concatenate([np.zeros(0, np.int64), *self.end_token[1:]])
        order = np.lexsort((tid, node))
        node, tid = node[order], tid[order]
        head = np.ones(node.size, dtype=bool)
        head[1:] = node[1:] != node[:-1]
        token = np.full(n, -1, dtype=kernel.TOKEN_ID)
        token[node[head]] = tid[head]
        extra_off = np.zeros(n + 1, dtype=kernel.NODE_INDEX)
        extra_off[1:] = np.cumsum(np.bincount(node[~head], minlength=n))
        preorder = byte, depth, skip, token, extra_off, tid[~head].astype(kernel.TOKEN_ID)
        return preorder, summarize((self.parent, self.byte), where, broken, node, tid, skip)

    @property
    def num_tokens(self) -> int:
        """Token ids with bytes (duplicates counted): the most one walk can return."""
        return self._num_tokens

    @property
    def num_nodes(self) -> int:
        """Distinct non-empty token prefixes."""
        return sum(self.sizes) - 1

    def walk(self, trans: Callable[[], np.ndarray], state: int,
             ensure_rows: Callable[[np.ndarray], None], num_words: int,
             built: Callable[[], np.ndarray] | None = None,
             seen: SeenFlags | None = None, loops: StateLoops | None = None,
             looping_limit: int | None = None) -> TrieWalk | None:
        """The tokens whose bytes lead from ``state`` to a live state (bitmask words of
        ``num_words`` int32), and the distinct states they reach.

        ``trans()`` returns the DFA's current ``[num_states, 256]`` table (it may grow while
        rows are built); ``ensure_rows(states)`` builds the rows of the given states (the
        walk asks only for states without one). State 0 is dead and its row is all zeros.
        With ``built()`` (the DFA's bool per state: row built) and the compiled loop loaded
        (:func:`trie_walk_kernel.ready`), that loop walks, flagging states in ``seen`` (the
        DFA owner's; a fresh one if None) and accepting whole subtrees that loop at a state
        (:mod:`subtree_summary`) from the answers in ``loops`` (the DFA owner's, kept across
        walks; a fresh one if None). With ``looping_limit``, a state whose row maps at least
        that many bytes to itself is not walked: None (the caller walks it otherwise).
        """
        seen = seen if seen is not None else SeenFlags()
        loops = loops if loops is not None else StateLoops()
        native = built is not None and kernel.ready()
        if native and kernel.whole_mask_call():  # the limit checked in the same call
            return self._walk_whole(trans, state, ensure_rows, built, num_words, seen, loops,
                                    257 if looping_limit is None else looping_limit)
        if looping_limit is not None:
            ensure_rows(np.array([state], dtype=np.int32))
            if np.count_nonzero(trans()[state] == state) >= looping_limit:
                return None
        if native:
            return self._walk_native(trans, state, ensure_rows, built, num_words, seen, loops)
        return walk_from_pairs(*self.walk_pairs(trans, state, ensure_rows), num_words)

    def _walk_whole(self, trans: Callable[[], np.ndarray], state: int,
                    ensure_rows: Callable[[np.ndarray], None], built: Callable[[], np.ndarray],
                    num_words: int, seen: SeenFlags, loops: StateLoops,
                    looping_limit: int = 257) -> TrieWalk | None:
        """:meth:`_walk_native`'s walk as one C call per missing row
        (:func:`trie_walk_kernel.walk_mask`: the preset and range choices, the flags' clearing
        and the successors' order made there; None where the state loops on at least
        ``looping_limit`` bytes): a cold key or punctuation state's mask paid ~15 numpy calls
        around a walk of a few subtrees."""
        words = np.zeros(num_words + 1, dtype=np.uint32)  # the last: the spare word
        succ = np.empty((2, self._num_tokens), dtype=np.int32)  # successors' states, tokens
        scratch = np.zeros((2, self.depth + 1), dtype=np.int32)  # the stack, the chain
        all_words = self._all_words(num_words)
        i, n, flags = 0, 0, seen.flags
        try:
            while True:
                table = trans()
                flags = seen.at_least(table.shape[0])
                i, n, missing = kernel.walk_mask(
                    table, built(), i, scratch[0], *self._walk_arrays,
                    *loops.at_least(table.shape[0]), *loops.steps_at_least(table.shape[0]),
                    scratch[1], words, flags, succ[0], succ[1], n, self._roots, all_words,
                    state, _PRESET_LIVE_BYTES, _ROOT_WALK_BYTES, looping_limit)
                if missing <= 0:
                    break
                ensure_rows(np.array([missing], dtype=np.int32))
        except BaseException:
            flags[succ[0, :n]] = 0  # as a finished walk leaves them (after a budget error)
            raise
        if missing < 0:
            return None
        return TrieWalk(words[:num_words].view(np.int32), succ[0, :n].copy(),
                        succ[1, :n].astype(np.int64))

    def _walk_native(self, trans: Callable[[], np.ndarray], state: int,
                     ensure_rows: Callable[[np.ndarray], None], built: Callable[[], np.ndarray],
                     num_words: int, seen: SeenFlags, loops: StateLoops) -> TrieWalk:
        if not built()[state]:
            ensure_rows(np.array([state], dtype=np.int32))
        row = trans()[state]
        live = np.flatnonzero(row)
        # where most printable bytes are live (a string), most tokens are allowed: the walk
        # starts from all of them and clears the refused ones (trie_walk_kernel's preset)
        preset = (live.size >= _PRESET_LIVE_BYTES
                  and np.count_nonzero(row[0x20:0x7F]) >= _PRESET_LIVE_BYTES)
        if preset:
            words = self._all_words(num_words).copy()
        else:
            words = np.zeros(num_words + 1, dtype=np.uint32)  # the last: the spare word
        # one allocation each (a cold mask pays per numpy call): successors' states and
        # tokens; the stack of states by depth and the counting skip's chain
        succ = np.empty((2, self._num_tokens), dtype=np.int32)
        succ_states, succ_tokens = succ[0], succ[1]
        scratch = np.zeros((2, self.depth + 1), dtype=np.int32)
        stack, chain = scratch[0], scratch[1]
        stack[0] = state
        n, flags = 0, seen.flags
        summary = self.summary
        try:
            for i, stop in self._walk_ranges(live, preset):
                while True:
                    table = trans()
                    flags = seen.at_least(table.shape[0])
                    i, n, missing = kernel.walk_preorder(
                        table, built(), i, stack, *self.preorder, summary.ascii_bytes,
                        summary.flags, summary.tokens, summary.token_start,
                        summary.chars_before, summary.max_chars, summary.token_chars,
                        summary.wide_chars, *loops.at_least(table.shape[0]),
                        *loops.steps_at_least(table.shape[0]), chain, words, flags,
                        succ_states, succ_tokens, n, int(preset), stop)
                    if not missing:
                        break
                    ensure_rows(np.array([missing], dtype=np.int32))
        finally:
            flags[succ_states[:n]] = 0  # clear for the next walk (also after a budget error)
        order = np.argsort(succ_states[:n], kind="stable")
        return TrieWalk(words[:num_words].view(np.int32), succ_states[order],
                        succ_tokens[order].astype(np.int64))

    def _walk_ranges(self, live: np.ndarray, preset: bool) -> list[tuple[int, int]]:
        """The preorder ranges a walk from a state with these ``live`` bytes covers: the
        subtrees of its live first bytes where they are few (the other first-level nodes,
        scattered through the arrays, are not touched: ~250 cache misses each a cold mask at
        262k), else the whole trie. Not with ``preset`` words: the dead subtrees must be
        walked to be cleared."""
        if preset or live.size > _ROOT_WALK_BYTES:
            return [(0, self.num_nodes)]
        ranges = self._root_ranges
        return [ranges[b] for b in live.tolist() if ranges[b] is not None]

    def _all_words(self, num_words: int) -> np.ndarray:
        """uint32 [num_words + 1]: the bits of every token of the trie (the spare word 0),
        made once per ``num_words``."""
        words = self._all_words_cache.get(num_words)
        if words is None:
            bits = np.zeros(32 * (num_words + 1), dtype=bool)
            bits[self.summary.tokens] = True
            words = np.packbits(bits, bitorder="little").view("<u4").copy()
            self._all_words_cache[num_words] = words
        return words

    def walk_pairs(self, trans: Callable[[], np.ndarray], state: int,
                   ensure_rows: Callable[[np.ndarray], None]) -> tuple[np.ndarray, np.ndarray]:
        """(token ids whose bytes lead from ``state`` to a live state, that state), walked
        level by level with numpy (the reference the compiled loop is tested against)."""
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
        return np.concatenate(ids).astype(np.int64), np.concatenate(states)
