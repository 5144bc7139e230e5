"""A GGUF file's ``tokenizer.ggml.*`` metadata, read without the tensors.

``gguf.GGUFReader`` builds an object per array element and per tensor: on Gemma 3's file
(262,144 tokens, scores and types) it takes 10-30 s. The metadata block sits at the start of
the file, so this reads only the key/value section (memory-mapped, little-endian GGUF v2/v3)
and keeps the ``tokenizer.`` keys: the tokens as strings, scores as float32 and token types
as int32 numpy arrays, the other values as Python scalars. About 0.3 s for 262k tokens.

Token types (llama.cpp's ``llama_token_type``): 1 normal, 2 unknown, 3 control,
4 user-defined (matched on raw text before the model splits), 5 unused, 6 byte (``<0xXX>``).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# GGUF value types -> (struct code, numpy dtype); 8 is a string, 9 an array
_SCALARS = {0: ("B", np.uint8), 1: ("b", np.int8), 2: ("H", np.uint16), 3: ("h", np.int16),
            4: ("I", np.uint32), 5: ("i", np.int32), 6: ("f", np.float32), 7: ("?", np.bool_),
            10: ("Q", np.uint64), 11: ("q", np.int64), 12: ("d", np.float64)}
_STRING, _ARRAY = 8, 9


@dataclass
class GGUFTokenizerMetadata:
    """The ``tokenizer.`` keys of a GGUF file (prefix stripped: ``ggml.tokens``...)."""

    path: Path
    values: dict[str, Any] = field(default_factory=dict)

    @property
    def model(self) -> str | None:
        """``tokenizer.ggml.model``: ``llama`` (SentencePiece), ``gpt2`` (byte-level BPE)..."""
        return self.values.get("ggml.model")

    @property
    def tokens(self) -> list[str]:
        return self.values["ggml.tokens"]

    @property
    def token_types(self) -> np.ndarray:
        """int32 per id (see the module docstring); all normal when the file has none."""
        types = self.values.get("ggml.token_type")
        return np.full(len(self.tokens), NORMAL, np.int32) if types is None else types

    @property
    def scores(self) -> np.ndarray:
        return self.values["ggml.scores"]

    def token_id(self, key: str) -> int | None:
        """``tokenizer.ggml.<key>_token_id`` (``bos``, ``eos``, ``unknown``, ``padding``)."""
        value = self.values.get(f"ggml.{key}_token_id")
        return None if value is None else int(value)


def read_tokenizer_metadata(path: str | Path) -> GGUFTokenizerMetadata:
    """The tokenizer metadata of the GGUF file at ``path`` (ValueError: not a GGUF file)."""
    path = Path(path)
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (magic {bytes(buf[:4])!r})")
        version, _tensors, count = struct.unpack_from("<IQQ", buf, 4)
        if version not in (2, 3):
            raise ValueError(f"{path}: GGUF version {version} is not supported (2 or 3)")
        reader = _Reader(buf, 24)
        out = GGUFTokenizerMetadata(path)
        for _ in range(count):
            key = reader.string()
            kind = reader.unpack("<I")
            wanted = key.startswith("tokenizer.")
            value = reader.value(kind, keep=wanted)
            if wanted:
                out.values[key[len("tokenizer."):]] = value
    return out


class _Reader:
    """Sequential little-endian reads from the mapped file."""

    def __init__(self, buf: mmap.mmap, offset: int) -> None:
        self.buf, self.pos = buf, offset

    def unpack(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.unpack("<Q")
        self.pos += n
        return self.buf[self.pos - n: self.pos].decode("utf-8", errors="surrogateescape")

    def value(self, kind: int, keep: bool) -> Any:
        if kind == _STRING:
            return self.string()
        if kind in _SCALARS:
            return self.unpack("<" + _SCALARS[kind][0])
        if kind != _ARRAY:
            raise ValueError(f"unknown GGUF value type {kind} at byte {self.pos}")
        item, n = self.unpack("<I"), self.unpack("<Q")
        if item in _SCALARS:  # one numpy view, copied out of the mapping only when kept
            dtype = np.dtype(_SCALARS[item][1]).newbyteorder("<")
            start, self.pos = self.pos, self.pos + n * dtype.itemsize
            return np.frombuffer(self.buf, dtype, n, start).copy() if keep else None
        values = [self.value(item, keep) for _ in range(n)]
        return values if keep else None
