"""The model vocabulary as real bytes per token id, ready for automaton walks.

Keys are the bytes a token stands for: byte-level BPE symbols (``Ġ`` → 0x20) are mapped back,
SentencePiece ``▁`` becomes a space and byte-fallback ``<0xXX>`` tokens become that byte.
Special tokens (BOS, pad, chat markers, EOS) never get bytes, so a grammar can never allow them
as text; EOS ids are kept aside and mean "finish". Ids at or past the tokenizer size (the
model's padded logits) have no bytes either, so they are never allowed.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from functools import cached_property
from typing import Any

import numpy as np

from .byte_columns import ByteColumns
from .token_trie import TokenTrie

# the cached per-vocabulary data :meth:`TokenVocabulary.prepare` computes ahead
_PREPARED = ("fingerprint", "eos_words", "extendable", "long_trie", "long_words",
             "single_byte_tokens")
_MAX_LONG_TOKENS = 256  # tokens walked one state at a time, past the shared short reach
_BYTE_FALLBACK = re.compile(r"^<0x([0-9A-Fa-f]{2})>$")


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible byte → printable-character table used by byte-level BPE."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + \
        list(range(0xAE, 0x100))
    table = {b: chr(b) for b in keep}
    extra = 0
    for b in range(256):
        if b not in table:
            table[b] = chr(256 + extra)
            extra += 1
    return table


_UNICODE_TO_BYTE = {c: b for b, c in bytes_to_unicode().items()}


def _decoder_kinds(tokenizer: Any) -> set[str]:
    """Types of the fast tokenizer's decoder pipeline (empty for slow tokenizers)."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is None:
        return set()
    decoder = backend.decoder  # its JSON alone: the whole tokenizer's is 33 MB at 262k tokens
    if decoder is None:
        return set()
    spec = json.loads(decoder.__getstate__())
    kinds, stack = set(), [spec]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            kinds.add(d.get("type", ""))
            stack.extend(d.get("decoders") or [])
    return kinds


def byte_level_bytes(token: str) -> bytes | None:
    """Bytes of a byte-level BPE symbol string (None: a character outside the table)."""
    try:
        return bytes(_UNICODE_TO_BYTE[c] for c in token)
    except KeyError:
        return None


def sentencepiece_piece_bytes(token: str) -> bytes:
    """Bytes of a SentencePiece piece: ``<0xXX>`` is that byte, ``▁`` a space."""
    m = _BYTE_FALLBACK.match(token)
    if m:
        return bytes([int(m.group(1), 16)])
    return token.replace("\u2581", " ").encode("utf-8")


def tokenizer_token_bytes(tokenizer: Any) -> list[bytes | None]:
    """Bytes of every token id of a Hugging Face tokenizer; None for special tokens."""
    kinds = _decoder_kinds(tokenizer)
    byte_level = "ByteLevel" in kinds or hasattr(tokenizer, "byte_decoder")
    size = len(tokenizer)
    special = set(getattr(tokenizer, "all_special_ids", []))
    added = getattr(tokenizer, "added_tokens_decoder", {}) or {}
    special.update(i for i, tok in added.items() if getattr(tok, "special", False))
    tokens = tokenizer.convert_ids_to_tokens(list(range(size)))
    out: list[bytes | None] = []
    for tid, token in enumerate(tokens):
        if tid in special or token is None:
            out.append(None)
        elif tid in added:  # added tokens are matched on raw text
            out.append(added[tid].content.encode("utf-8"))
        elif byte_level:
            out.append(byte_level_bytes(token) or token.encode("utf-8"))
        else:
            out.append(sentencepiece_piece_bytes(token))
    return out


class TokenVocabulary:
    """Bytes per token id plus the arrays that token walks use.

    ``token_bytes[t]`` is None (never allowed) for special tokens, EOS, padding ids and tokens
    with no text. EOS ids are allowed only where a grammar may end.
    """

    def __init__(self, token_bytes: Sequence[bytes | None], vocab_size: int,
                 eos_token_ids: Sequence[int]) -> None:
        if vocab_size < 1:
            raise ValueError(f"vocab_size must be >= 1, got {vocab_size}")
        eos = tuple(sorted({int(e) for e in eos_token_ids}))
        bad = [e for e in eos if not 0 <= e < vocab_size]
        if bad:
            raise ValueError(f"EOS ids must lie in [0, {vocab_size}), got {bad}")
        table: list[bytes | None] = [None] * vocab_size
        for tid, data in enumerate(token_bytes[:vocab_size]):
            table[tid] = data if data else None
        for e in eos:
            table[e] = None
        self.vocab_size = vocab_size
        self.eos_token_ids = eos
        self.token_bytes = table
        self.num_words = (vocab_size + 31) // 32
        self._build_walk_arrays()
        self.trie = TokenTrie(table)  # distinct prefixes, for walks that share them

    @classmethod
    def from_tokenizer(cls, tokenizer: Any, vocab_size: int,
                       eos_token_ids: Sequence[int]) -> TokenVocabulary:
        """From a Hugging Face tokenizer; ``vocab_size`` is the model's logits width.

        Token ids at or past ``vocab_size`` can never be sampled, so they are dropped.
        """
        return cls(tokenizer_token_bytes(tokenizer), vocab_size, eos_token_ids)

    def _build_walk_arrays(self) -> None:
        ids = [t for t, b in enumerate(self.token_bytes) if b]
        ids.sort(key=lambda t: -len(self.token_bytes[t]))
        lengths = np.array([len(self.token_bytes[t]) for t in ids], dtype=np.int32)
        max_len = int(lengths[0]) if ids else 1
        # all tokens' bytes end to end, into ragged columns (byte_columns.py)
        flat = np.frombuffer(b"".join(self.token_bytes[t] for t in ids), dtype=np.uint8)
        row = np.repeat(np.arange(len(ids)), lengths)
        cols = ByteColumns(flat, lengths)
        bitsets = np.zeros((4, len(ids)), dtype=np.uint64)
        np.bitwise_or.at(bitsets, (flat >> 6, row),
                         np.left_shift(np.uint64(1), (flat & 63).astype(np.uint64)))
        self.walk_ids = np.array(ids, dtype=np.int64)
        self.walk_cols = cols  # [max_len, <= n]: byte i of each token longer than i (ranks)
        self.walk_lengths = lengths
        self.walk_neg_lengths = -lengths  # ascending: searchsorted finds "longer than i"
        self.walk_first = cols[0] if len(ids) else np.zeros(0, dtype=np.uint8)
        self.walk_bytesets = bitsets  # [4, n] uint64: which bytes each token contains
        self.max_token_len = max_len

    @cached_property
    def eos_words(self) -> np.ndarray:
        """int32 bitmask row with only the EOS bits set."""
        bits = np.zeros(self.num_words * 32, dtype=bool)
        bits[list(self.eos_token_ids)] = True
        return np.packbits(bits, bitorder="little").view("<i4").copy()

    @cached_property
    def fingerprint(self) -> str:
        """Stable hash of (size, EOS ids, bytes per id): the compile-cache key part."""
        h = hashlib.sha256()
        h.update(f"{self.vocab_size}|{self.eos_token_ids}|".encode())
        for tid, data in enumerate(self.token_bytes):
            if data:
                h.update(tid.to_bytes(4, "little") + len(data).to_bytes(2, "little") + data)
        return h.hexdigest()[:32]

    @cached_property
    def extendable(self) -> np.ndarray:
        """bool per id: the token's bytes are a proper prefix of another token's bytes."""
        # every trie node is a prefix of some token: extendable = its node has a child
        out = np.zeros(self.vocab_size, dtype=bool)
        trie = self.trie
        for d in range(1, trie.depth):  # nodes at the deepest level have no children
            ends = trie.end_node[d]
            out[trie.end_token[d][trie.child_count[d][ends] > 0]] = True
        return out

    @cached_property
    def single_byte_tokens(self) -> np.ndarray:
        """bool[256]: some token's bytes are exactly that one byte (all 256 in byte-level
        BPE and in SentencePiece with byte fallback): the steps of a closing path
        (:mod:`.closing_index`)."""
        out = np.zeros(256, dtype=bool)
        for data in self.token_bytes:
            if data is not None and len(data) == 1:
                out[data[0]] = True
        return out

    @cached_property
    def byte_strings(self) -> frozenset[bytes]:
        """The distinct bytes of the text tokens (cutting a text into tokens)."""
        return frozenset(b for b in self.token_bytes if b)

    @cached_property
    def short_reach(self) -> int:
        """The shortest length L (at least 8) with at most :data:`_MAX_LONG_TOKENS` tokens
        longer than L: masks of tokens up to L bytes are shared by states whose terms agree
        once counters past L are clamped (see :class:`TokenIndex`); the few longer tokens
        are walked per state (:attr:`long_trie`). A few very long tokens (runs of spaces:
        81 bytes in SmolLM2's 49k vocabulary, 16 or fewer in all but 155) would otherwise
        set the reach, and bounded strings up to that length would share no mask at all."""
        lengths = np.sort(self.walk_lengths)[::-1]  # longest first
        if lengths.size <= _MAX_LONG_TOKENS:
            return max(int(lengths.max(initial=1)), 1)
        return max(int(lengths[_MAX_LONG_TOKENS]), min(8, self.max_token_len))

    @cached_property
    def long_trie(self) -> TokenTrie:
        """The trie of the tokens longer than :attr:`short_reach` (ids as in the vocabulary)."""
        reach = self.short_reach
        return TokenTrie([b if b and len(b) > reach else None for b in self.token_bytes])

    @cached_property
    def long_words(self) -> np.ndarray:
        """int32 bitmask row with the bits of the tokens longer than :attr:`short_reach`."""
        bits = np.zeros(self.num_words * 32, dtype=bool)
        reach = self.short_reach
        bits[[t for t, b in enumerate(self.token_bytes) if b and len(b) > reach]] = True
        return np.packbits(bits, bitorder="little").view("<i4").copy()

    def prepare(self) -> None:
        """Compute now the per-vocabulary data built lazily otherwise (the cache-key
        fingerprint, the EOS row, which tokens extend to others), so no compile or first
        decoding step pays for it (at 131k tokens: ~25 ms and ~150 ms). Idempotent; a
        :class:`GrammarCompiler` calls it on construction, once for all its grammars."""
        for name in _PREPARED:
            getattr(self, name)

    @property
    def prepared(self) -> bool:
        """Whether :meth:`prepare`'s data is computed (cached on this object)."""
        return all(name in self.__dict__ for name in _PREPARED)  # cached_property's slot

    def decode_bytes(self, token_ids: Sequence[int]) -> bytes:
        """Concatenated bytes of non-special tokens (EOS and specials contribute nothing)."""
        return b"".join(self.token_bytes[t] or b"" for t in token_ids)
