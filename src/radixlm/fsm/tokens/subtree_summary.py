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
DENSE_SHARE = 4  # a subtree of at least this many tokens per bitmask word gets a dense row
DENSE_MAX_BYTES = 8 << 20  # the dense rows' memory at most

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
    # the subtrees with the most tokens also as a bitmask (a row of ``dense``, OR-ed in one
    # pass, instead of a bit per token): int32 [n] row or -1, uint32 [rows, words]
    dense_row: np.ndarray
    dense: np.ndarray

    @property
    def nbytes(self) -> int:
        """Memory held (per node ~21 bytes, per token 4)."""
        return sum(a.nbytes for a in (self.ascii_bytes, self.flags, self.tokens,
                                      self.token_start, self.dense_row, self.dense))


def whole_chars_from(cols: np.ndarray) -> np.ndarray:
    """bool [rows, width + 1]: column k is True where ``row[k:]`` is well-formed UTF-8
    (``cols`` int16 [rows, width], -1 past a row's end; past the end counts as empty)."""
    rows, width = cols.shape
    ok = np.ones((rows, width + 1), dtype=bool)
    for k in range(width - 1, -1, -1):
        b = cols[:, k].astype(np.int32)
        here = (b < 0) | ((b < 0x80) & ok[:, k + 1])
        for seq in UTF8_SEQUENCES:
            if k + len(seq) > width:
                continue
            match = (b >= seq[0][0]) & (b <= seq[0][1])
            for j, (lo, hi) in enumerate(seq[1:], start=1):
                nxt = cols[:, k + j]
                match &= (nxt >= lo) & (nxt <= hi)
            here |= match & ok[:, k + len(seq)]
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
        for w in range(2):
            np.bitwise_or.at(words[d - 1][:, w], parent[d], words[d][:, w])
        np.logical_or.at(wide[d - 1], parent[d], wide[d])
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
    dense_row, dense = dense_rows(token_start, skip, tid)
    return SubtreeSummary(ascii_bytes, flags, tid.astype(np.int32), token_start, dense_row,
                          dense)


def dense_rows(token_start: np.ndarray, skip: np.ndarray, tid: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Bitmask rows for the subtrees of at least :data:`DENSE_SHARE` of the bitmask's words in
    tokens (setting them one by one costs more than OR-ing the row; at most
    :data:`DENSE_MAX_BYTES` of rows, the largest subtrees first): (row per node or -1, rows).
    A few dozen subtrees near the root at 262k tokens (~3 MB), the free-string walk's
    largest skips."""
    words = max((int(tid.max(initial=-1)) + 32) // 32, 1)
    count = token_start[skip] - token_start[:-1]
    chosen = np.flatnonzero(count >= max(DENSE_SHARE * words, 1))
    chosen = chosen[np.argsort(-count[chosen], kind="stable")][: DENSE_MAX_BYTES // (4 * words)]
    dense_row = np.full(count.size, -1, dtype=np.int32)
    dense_row[chosen] = np.arange(chosen.size, dtype=np.int32)
    bits = np.zeros((chosen.size, words * 32), dtype=bool)
    for r, i in enumerate(chosen.tolist()):
        bits[r, tid[token_start[i]:token_start[skip[i]]]] = True
    dense = np.packbits(bits, axis=1, bitorder="little").view("<u4").reshape(chosen.size, words)
    return dense_row, np.ascontiguousarray(dense, dtype=np.uint32)
