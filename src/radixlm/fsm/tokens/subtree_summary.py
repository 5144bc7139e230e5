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

    @property
    def nbytes(self) -> int:
        """Memory held (per node 21 bytes, per token 4)."""
        return sum(a.nbytes for a in (self.ascii_bytes, self.flags, self.tokens,
                                      self.token_start))


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
    return SubtreeSummary(ascii_bytes, flags, tid.astype(np.int32), token_start)
