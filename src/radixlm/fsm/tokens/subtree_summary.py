"""Per trie node, what its whole subtree is made of: the summaries that let the compiled walk
(:mod:`trie_walk_kernel`) accept a subtree without walking it.

In a state that maps a byte to itself (a self-loop: inside a free JSON string, every plain
character), any token made only of such bytes is allowed and leads back to that state. So at
a node whose subtree uses only bytes that loop at the state before the node, the walk sets
the bits of every token of the subtree (a range of :attr:`SubtreeSummary.tokens`, ordered by
node in preorder) and jumps past it. Non-ASCII text is the same one level up: a state where
every well-formed multi-byte UTF-8 character leads back to it (:mod:`state_loops`) loops on
whole characters, so a subtree whose token bytes from the node on are complete characters and
looping ASCII is accepted too. At Gemma 3's 262k tokens (588k nodes) a free string's walk
then visits the few nodes whose subtrees hold a quote, a backslash, a control byte or a cut
character, instead of all of them.

Per node (preorder, as :attr:`TokenTrie.preorder`): the ASCII bytes of its subtree (the
node's own byte included) as two 64-bit words, and flags: :data:`NON_ASCII` (some byte of
the subtree is >= 0x80) and :data:`WHOLE_CHARS` (every token through the node is, from the
node's byte on, well-formed UTF-8: the Unicode standard's table 3-7, as Python's strict
decoder; the same table :mod:`state_loops` checks states against).

For the counting skip (states where nothing loops but every character moves state k to one
same state k + 1: a bounded string, a counted repetition), characters are counted: per node,
the characters of its prefix before its own byte (:attr:`SubtreeSummary.chars_before`) and
the most any token of its subtree has (:attr:`SubtreeSummary.max_chars`), and per token its
own (:attr:`SubtreeSummary.token_chars`, in the order of :attr:`SubtreeSummary.tokens`). A
character is counted at its first byte (any byte but a continuation byte 0x80-0xBF): where
the bytes from a node on are whole characters (ASCII or :data:`WHOLE_CHARS`), a token's
characters from the node on are ``token_chars - chars_before``. Per node too, the most
characters any token of the subtree has begun up to its last multi-byte one
(:attr:`SubtreeSummary.wide_chars`): past that many, every character of the subtree is ASCII,
so the skip asks where multi-byte characters lead (rows of the states inside them) only that
far.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NON_ASCII = 1  # flag: the subtree has a byte >= 0x80
WHOLE_CHARS = 2  # flag: from the node's byte on, every token through it is whole characters

# Well-formed UTF-8 multi-byte characters (Unicode table 3-7): per lead-byte range, the
# ranges of the bytes after it.
UTF8_SEQUENCES: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0xC2, 0xDF), (0x80, 0xBF)),
    ((0xE0, 0xE0), (0xA0, 0xBF), (0x80, 0xBF)),
    ((0xE1, 0xEC), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xED, 0xED), (0x80, 0x9F), (0x80, 0xBF)),
    ((0xEE, 0xEF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF0, 0xF0), (0x90, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF1, 0xF3), (0x80, 0xBF), (0x80, 0xBF), (0x80, 0xBF)),
    ((0xF4, 0xF4), (0x80, 0x8F), (0x80, 0xBF), (0x80, 0xBF)),
)


@dataclass(frozen=True)
class SubtreeSummary:
    """The arrays the compiled walk reads (``n`` nodes in preorder)."""

    ascii_bytes: np.ndarray  # uint64 [n, 2]: bit b of word b // 64 = byte b in the subtree
    flags: np.ndarray  # uint8 [n]: NON_ASCII | WHOLE_CHARS
    tokens: np.ndarray  # int32 [tokens]: every token id, by its node's preorder position
    # int32 [n + 1]: node i's subtree holds tokens[token_start[i]:token_start[skip[i]]]
    token_start: np.ndarray
    chars_before: np.ndarray  # uint16 [n]: characters begun in the prefix before the node's byte
    max_chars: np.ndarray  # uint16 [n]: the most characters begun by a token of the subtree
    token_chars: np.ndarray  # uint16 [tokens]: characters begun by each token of ``tokens``
    # uint16 [n]: the most characters begun by a token of the subtree up to its last
    # multi-byte character (0 where none has one)
    wide_chars: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held (per node 27 bytes, per token 6)."""
        return sum(a.nbytes for a in (self.ascii_bytes, self.flags, self.tokens,
                                      self.token_start, self.chars_before, self.max_chars,
                                      self.token_chars, self.wide_chars))


def whole_chars_from(cols: np.ndarray) -> np.ndarray:
    """bool [rows, width + 1]: column k is True where ``row[k:]`` is well-formed UTF-8
    (``cols`` int16 [rows, width], -1 past a row's end; past the end counts as empty). Only
    rows with a byte >= 0x80 are worked out (the rest are ASCII: True throughout)."""
    rows, width = cols.shape
    ok = np.ones((rows, width + 1), dtype=bool)
    wide = np.flatnonzero((cols >= 0x80).any(axis=1))
    if wide.size:
        ok[wide] = _whole_chars_from(cols[wide])
    return ok


def _whole_chars_from(cols: np.ndarray) -> np.ndarray:
    rows, width = cols.shape
    ok = np.ones((rows, width + 1), dtype=bool)
    for k in range(width - 1, -1, -1):
        b = cols[:, k]
        here = (b < 0) | ((b < 0x80) & ok[:, k + 1])
        lead = np.flatnonzero(b >= 0xC2)  # the rest >= 0x80 are continuation bytes: False
        for seq in UTF8_SEQUENCES:
            if k + len(seq) > width or not lead.size:
                continue
            bl = b[lead]
            match = (bl >= seq[0][0]) & (bl <= seq[0][1])
            for j, (lo, hi) in enumerate(seq[1:], start=1):
                nxt = cols[lead, k + j]
                match &= (nxt >= lo) & (nxt <= hi)
            here[lead] |= match & ok[lead, k + len(seq)]
        ok[:, k] = here
    return ok


def summarize(levels: tuple[list[np.ndarray], list[np.ndarray]], where: list[np.ndarray],
              broken: list[np.ndarray], node: np.ndarray, tid: np.ndarray,
              skip: np.ndarray) -> SubtreeSummary:
    """The summaries of a trie given level by level: ``levels`` (parent index at level d - 1,
    last byte) per level, ``where[d]`` each level-d node's preorder position, ``broken[d]``
    the level-d nodes some token through which is not whole characters from there on, and
    every token's (preorder node, id), sorted by node then id, and each preorder node's index
    past its subtree (``skip``)."""
    num_nodes = skip.size
    parent, byte = levels
    depth = len(parent) - 1
    words = [np.zeros((b.size, 2), dtype=np.uint64) for b in byte]
    wide = [b >= 0x80 for b in byte]
    for d in range(1, depth + 1):
        ascii_ = ~wide[d]
        b = byte[d][ascii_]
        words[d][np.flatnonzero(ascii_), b >> 6] = np.left_shift(np.uint64(1),
                                                                 (b & 63).astype(np.uint64))
    for d in range(depth, 1, -1):  # children into parents, deepest level first
        # a level's nodes are ordered by parent: each parent's children are one run
        first = np.flatnonzero(np.r_[True, parent[d][1:] != parent[d][:-1]])
        owner = parent[d][first]
        words[d - 1][owner] |= np.bitwise_or.reduceat(words[d], first, axis=0)
        wide[d - 1][owner] |= np.logical_or.reduceat(wide[d], first)
    ascii_bytes = np.zeros((num_nodes, 2), dtype=np.uint64)
    flags = np.zeros(num_nodes, dtype=np.uint8)
    for d in range(1, depth + 1):
        ascii_bytes[where[d]] = words[d]
        level_flags = np.where(wide[d], NON_ASCII, 0).astype(np.uint8)
        whole = np.ones(byte[d].size, dtype=bool)
        whole[broken[d]] = False
        level_flags[whole] |= WHOLE_CHARS
        flags[where[d]] = level_flags
    token_start = np.searchsorted(node, np.arange(num_nodes + 1)).astype(np.int32)
    counts = _count_chars(levels, where, node, num_nodes)
    return SubtreeSummary(ascii_bytes, flags, tid.astype(np.int32), token_start, *counts)


def _count_chars(levels: tuple[list[np.ndarray], list[np.ndarray]], where: list[np.ndarray],
                 node: np.ndarray, num_nodes: int) -> tuple[np.ndarray, ...]:
    """(chars_before, max_chars, token_chars, wide_chars) of :class:`SubtreeSummary` (see
    there)."""
    parent, byte = levels
    depth = len(parent) - 1
    begun = [np.zeros(1, dtype=np.int64)]  # per level: characters begun through each node
    wide = [np.zeros(1, dtype=np.int64)]  # ... up to the last multi-byte one (0: none)
    for d in range(1, depth + 1):
        starts = (byte[d] < 0x80) | (byte[d] >= 0xC0)  # not a continuation byte
        begun.append(begun[d - 1][parent[d]] + starts)
        wide.append(np.where(byte[d] >= 0x80, begun[d], wide[d - 1][parent[d]]))
    is_end = np.zeros(num_nodes, dtype=bool)
    is_end[node] = True
    most = [np.zeros(1, dtype=np.int64)]  # per level: the most begun by a token below
    most += [np.where(is_end[where[d]], begun[d], 0) for d in range(1, depth + 1)]
    most_wide = [np.zeros(1, dtype=np.int64)]
    most_wide += [np.where(is_end[where[d]], wide[d], 0) for d in range(1, depth + 1)]
    for d in range(depth, 1, -1):  # children into parents, deepest level first
        np.maximum.at(most[d - 1], parent[d], most[d])
        np.maximum.at(most_wide[d - 1], parent[d], most_wide[d])
    # uint16: as a node's depth (a token's bytes, so its characters, fit)
    chars_before = np.zeros(num_nodes, dtype=np.uint16)
    max_chars = np.zeros(num_nodes, dtype=np.uint16)
    through = np.zeros(num_nodes, dtype=np.uint16)
    wide_chars = np.zeros(num_nodes, dtype=np.uint16)
    for d in range(1, depth + 1):
        chars_before[where[d]] = begun[d - 1][parent[d]]
        max_chars[where[d]] = most[d]
        through[where[d]] = begun[d]
        wide_chars[where[d]] = most_wide[d]
    return chars_before, max_chars, through[node], wide_chars
