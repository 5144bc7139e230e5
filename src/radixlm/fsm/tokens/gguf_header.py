"""A GGUF file's header, read fast: metadata key/values, tensor infos, where the data starts.

GGUF (llama.cpp's single-file format, versions 2 and 3, little-endian) is: ``GGUF``, the
version (u32), the tensor count and the key/value count (u64 each); the key/values (key string,
value type u32, value); one info per tensor (name, dims innermost-first, GGML type u32, offset
u64 into the data section); padding to ``general.alignment`` (32 by default); the tensor data.

``gguf.GGUFReader`` builds a numpy view per part of every array element: on SmolLM2's file
(49k tokens and 48k merges, 147k parts) that took 33 s under load, and ``import gguf`` imports
``mistral_common`` (18 s more). Here the file is memory-mapped read-only and walked once:
scalars and strings become Python values, a numeric array one numpy view of the map, and an
array of strings one int64 offset per element in a numpy array (decoded only when asked:
:meth:`GGUFStringArray.tolist`). Tensor data is never read here: each
:class:`GGUFTensorInfo` holds a zero-copy view of the map (``data``, the same shape and dtype
``GGUFReader`` gives: numpy order, raw bytes ``[..., row_bytes]`` for block types).

A truncated or corrupt file raises :class:`GGUFHeaderError` naming the byte and the problem.
"""

from __future__ import annotations

import mmap
import struct
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# GGUF value types: scalars -> (struct code, numpy dtype); 8 is a string, 9 an array
SCALARS = {0: ("B", np.uint8), 1: ("b", np.int8), 2: ("H", np.uint16), 3: ("h", np.int16),
           4: ("I", np.uint32), 5: ("i", np.int32), 6: ("f", np.float32), 7: ("?", np.bool_),
           10: ("Q", np.uint64), 11: ("q", np.int64), 12: ("d", np.float64)}
STRING, ARRAY = 8, 9
DEFAULT_ALIGNMENT = 32
# GGML tensor types: id -> (name, elements per block, bytes per block), as gguf-py's
# GGML_QUANT_SIZES (ids 4, 5 and 31-33 were removed from the format)
GGML_TYPES = {
    0: ("F32", 1, 4), 1: ("F16", 1, 2), 2: ("Q4_0", 32, 18), 3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22), 7: ("Q5_1", 32, 24), 8: ("Q8_0", 32, 34), 9: ("Q8_1", 32, 40),
    10: ("Q2_K", 256, 84), 11: ("Q3_K", 256, 110), 12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176), 14: ("Q6_K", 256, 210), 15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66), 17: ("IQ2_XS", 256, 74), 18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50), 20: ("IQ4_NL", 32, 18), 21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82), 23: ("IQ4_XS", 256, 136), 24: ("I8", 1, 1), 25: ("I16", 1, 2),
    26: ("I32", 1, 4), 27: ("I64", 1, 8), 28: ("F64", 1, 8), 29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2), 34: ("TQ1_0", 256, 54), 35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17), 40: ("NVFP4", 64, 36), 41: ("Q1_0", 128, 18),
}
# types whose data GGUFReader (and so this) exposes as typed elements, not raw bytes
_ELEMENT_DTYPES = {"F32": np.float32, "F16": np.float16, "F64": np.float64, "I8": np.int8,
                   "I16": np.int16, "I32": np.int32, "I64": np.int64}
_REMEDY = "download or convert it again"


class GGUFHeaderError(ValueError):
    """The file is not a GGUF this reader understands, or is truncated or corrupt."""


@dataclass(frozen=True)
class GGUFStringArray:
    """An array of strings as the file stores them, decoded only when asked.

    ``starts`` int64 ``[n + 1]``: byte offsets of each string's u64 length prefix in ``buf``,
    then the array's end; a string's bytes are ``buf[starts[i] + 8 : starts[i + 1]]``."""

    buf: memoryview
    starts: np.ndarray

    def __len__(self) -> int:
        return len(self.starts) - 1

    def __getitem__(self, i: int) -> str:
        if not -len(self) <= i < len(self):
            raise IndexError(f"string {i} of {len(self)}")
        i %= len(self)
        return _decode(self.buf[int(self.starts[i]) + 8:int(self.starts[i + 1])])

    def tolist(self) -> list[str]:
        """Every string (UTF-8; bytes that are not UTF-8 kept as surrogate escapes)."""
        first = int(self.starts[0])
        blob = bytes(self.buf[first:int(self.starts[-1])])  # one copy, sliced per string
        ends = (self.starts[1:] - first).tolist()
        begins = (self.starts[:-1] - first + 8).tolist()
        return [blob[a:b].decode("utf-8", errors="surrogateescape")
                for a, b in zip(begins, ends)]


@dataclass(frozen=True)
class GGUFField:
    """One metadata value: its GGUF type, the element type for arrays, and the value as read
    (a Python scalar or ``str``; a numpy view for a numeric array, a
    :class:`GGUFStringArray` for strings, a list of those for an array of arrays)."""

    type: int
    item_type: int | None
    raw: Any

    def contents(self) -> Any:
        """The value in Python terms, as ``GGUFReader``'s ``ReaderField.contents()``: arrays
        as lists."""
        return _contents(self.raw)


def _contents(raw: Any) -> Any:
    if isinstance(raw, (np.ndarray, GGUFStringArray)):
        return raw.tolist()
    if isinstance(raw, list):
        return [_contents(r) for r in raw]
    return raw


@dataclass(frozen=True)
class GGUFTensorInfo:
    """One tensor's info. ``shape`` is GGUF's (innermost first: ``[in, out]`` for a matrix);
    ``data`` a read-only view of the file's map, numpy order (``GGUFReader``'s layout)."""

    name: str
    shape: tuple[int, ...]
    type_id: int
    type_name: str
    n_elements: int
    n_bytes: int
    data_offset: int  # absolute, in the file
    data: np.ndarray


@dataclass(frozen=True)
class GGUFHeader:
    """A parsed GGUF header (:func:`read_gguf_header`)."""

    path: Path
    version: int
    alignment: int
    data_offset: int
    fields: dict[str, GGUFField]
    tensors: list[GGUFTensorInfo]

    def value(self, key: str, default: Any = None) -> Any:
        """The value of ``key`` in Python terms (arrays as lists), or ``default``."""
        f = self.fields.get(key)
        return default if f is None else f.contents()

    def tensor(self, name: str) -> GGUFTensorInfo | None:
        return next((t for t in self.tensors if t.name == name), None)


def read_gguf_header(path: str | Path, tensors: bool = True) -> GGUFHeader:
    """The header of the GGUF file at ``path``; with ``tensors=False`` only the key/values
    (``tensors`` empty, ``data_offset`` 0). Raises :class:`GGUFHeaderError` (a ValueError)."""
    path = Path(path)
    with path.open("rb") as f:
        size = f.seek(0, 2)
        if size == 0:
            raise GGUFHeaderError(f"{path} is empty, not a GGUF file; {_REMEDY}")
        buf = memoryview(mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ))
    walk = _Walk(buf, path)
    if bytes(buf[:4]) != b"GGUF":
        raise GGUFHeaderError(f"{path} is not a GGUF file (magic {bytes(buf[:4])!r}, "
                              f"expected b'GGUF')")
    walk.pos = 4
    version, n_tensors, n_kv = walk.unpack("<IQQ", "the file's counts")
    if version not in (2, 3):
        raise GGUFHeaderError(f"{path}: GGUF version {version} is not supported (2 or 3)")
    walk.plausible(n_kv, 8, "key/value count")
    walk.plausible(n_tensors, 8, "tensor count")
    fields: dict[str, GGUFField] = {}
    for _ in range(n_kv):
        key = walk.string("a metadata key")
        kind = walk.unpack("<I", f"the type of {key!r}")[0]
        fields[key] = walk.field(kind, key)
    if not tensors:
        return GGUFHeader(path, version, DEFAULT_ALIGNMENT, 0, fields, [])
    alignment = _alignment(fields, path)
    infos = [walk.tensor_info() for _ in range(n_tensors)]
    data_offset = -(-walk.pos // alignment) * alignment
    return GGUFHeader(path, version, alignment, data_offset, fields,
                      _tensors(infos, buf, data_offset, size, path))


def _alignment(fields: dict[str, GGUFField], path: Path) -> int:
    f = fields.get("general.alignment")
    if f is None:
        return DEFAULT_ALIGNMENT
    if f.type != 4:
        raise GGUFHeaderError(f"{path}: general.alignment has GGUF type {f.type}, not uint32")
    if f.raw == 0 or f.raw & (f.raw - 1):
        raise GGUFHeaderError(f"{path}: general.alignment {f.raw} is not a power of two")
    return int(f.raw)


def _tensors(infos: list[tuple[str, tuple[int, ...], int, int]], buf: memoryview,
             data_offset: int, size: int, path: Path) -> list[GGUFTensorInfo]:
    whole = np.frombuffer(buf, np.uint8)  # read-only: the map is
    out, names = [], set()
    for name, dims, type_id, offset in infos:
        if name in names:
            raise GGUFHeaderError(f"{path}: tensor {name!r} appears twice; the file is corrupt")
        names.add(name)
        type_name, block, block_bytes = GGML_TYPES[type_id]
        n_elements = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if dims and dims[0] % block:
            raise GGUFHeaderError(f"{path}: tensor {name!r} ({type_name}) has {dims[0]} "
                                  f"columns, not a multiple of its block of {block}")
        n_bytes = n_elements // block * block_bytes
        start = data_offset + offset
        if start + n_bytes > size:
            raise GGUFHeaderError(
                f"{path}: the file is truncated (tensor {name!r} ends at byte "
                f"{start + n_bytes}, the file has {size}); {_REMEDY}")
        np_dims = tuple(reversed(dims))
        dtype = _ELEMENT_DTYPES.get(type_name)
        if dtype is None:  # raw bytes, the innermost dimension in bytes
            data = whole[start:start + n_bytes]
            np_dims = (*np_dims[:-1], np_dims[-1] // block * block_bytes) if np_dims else ()
        else:
            data = whole[start:start + n_bytes].view(dtype)
        out.append(GGUFTensorInfo(name, dims, type_id, type_name, n_elements, n_bytes, start,
                                  data.reshape(np_dims)))
    return out


def _decode(raw: memoryview) -> str:
    return bytes(raw).decode("utf-8", errors="surrogateescape")


class _Walk:
    """Sequential little-endian reads from the mapped file, each checked against its end."""

    _LENGTH = struct.Struct("<Q")

    def __init__(self, buf: memoryview, path: Path) -> None:
        self.buf, self.path, self.pos, self.size = buf, path, 0, len(buf)

    def need(self, n: int, what: str) -> None:
        if self.pos + n > self.size:
            raise GGUFHeaderError(
                f"{self.path}: the file is truncated: {what} at byte {self.pos} needs {n} "
                f"bytes, the file has {self.size}; {_REMEDY}")

    def plausible(self, count: int, min_bytes: int, what: str) -> None:
        """A count whose items (``min_bytes`` each at least) could fit in the rest of the
        file: a corrupt count would otherwise allocate or loop for ever."""
        if count * min_bytes > self.size - self.pos:
            raise GGUFHeaderError(
                f"{self.path}: {what} {count} at byte {self.pos} cannot fit in a file of "
                f"{self.size} bytes; the file is corrupt or truncated; {_REMEDY}")

    def unpack(self, fmt: str, what: str) -> tuple[Any, ...]:
        n = struct.calcsize(fmt)
        self.need(n, what)
        values = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += n
        return values

    def string(self, what: str) -> str:
        n = self.unpack("<Q", what)[0]
        self.need(n, what)
        self.pos += n
        return _decode(self.buf[self.pos - n:self.pos])

    def field(self, kind: int, key: str) -> GGUFField:
        if kind != ARRAY:
            return GGUFField(kind, None, self.value(kind, key))
        item = self.unpack("<IQ", f"the array {key!r}")
        return GGUFField(ARRAY, item[0], self.array(item[0], item[1], key))

    def value(self, kind: int, key: str) -> Any:
        if kind == STRING:
            return self.string(f"the string {key!r}")
        if kind in SCALARS:
            return self.unpack("<" + SCALARS[kind][0], f"the value of {key!r}")[0]
        if kind == ARRAY:
            item, n = self.unpack("<IQ", f"the array {key!r}")
            return self.array(item, n, key)
        raise GGUFHeaderError(f"{self.path}: unknown GGUF value type {kind} for {key!r} at "
                              f"byte {self.pos}; the file is corrupt or from a newer GGUF")

    def array(self, item: int, n: int, key: str) -> Any:
        if item in SCALARS:  # one view of the map
            dtype = np.dtype(SCALARS[item][1]).newbyteorder("<")
            self.need(n * dtype.itemsize, f"the array {key!r} ({n} items)")
            start, self.pos = self.pos, self.pos + n * dtype.itemsize
            return np.frombuffer(self.buf, dtype, n, start)
        self.plausible(n, 8, f"the array {key!r}'s length")
        if item == STRING:
            return self.strings(n, key)
        return [self.value(item, key) for _ in range(n)]  # arrays of arrays: rare, small

    def strings(self, n: int, key: str) -> GGUFStringArray:
        """Walk ``n`` length-prefixed strings: one offset each, no string built."""
        starts = array("q")
        append, length, buf, pos = starts.append, self._LENGTH.unpack_from, self.buf, self.pos
        try:
            for _ in range(n):
                append(pos)
                pos += 8 + length(buf, pos)[0]
        except struct.error:
            pos = self.size + 1  # a length prefix past the end
        if pos > self.size:
            raise GGUFHeaderError(
                f"{self.path}: the file is truncated: string {len(starts) - 1} of the array "
                f"{key!r} (at byte {starts[-1]}) runs past its end, byte {self.size}; {_REMEDY}")
        starts.append(pos)
        self.pos = pos
        return GGUFStringArray(self.buf, np.frombuffer(starts, np.int64))

    def tensor_info(self) -> tuple[str, tuple[int, ...], int, int]:
        name = self.string("a tensor name")
        n_dims = self.unpack("<I", f"tensor {name!r}'s rank")[0]
        if n_dims > 8:
            raise GGUFHeaderError(f"{self.path}: tensor {name!r} has {n_dims} dimensions at "
                                  f"byte {self.pos}; the file is corrupt")
        dims = self.unpack(f"<{n_dims}Q", f"tensor {name!r}'s shape")
        type_id, offset = self.unpack("<IQ", f"tensor {name!r}'s type and offset")
        if type_id not in GGML_TYPES:
            raise GGUFHeaderError(
                f"{self.path}: tensor {name!r} has GGML type id {type_id}, unknown to this "
                f"reader (a newer llama.cpp format?)")
        return name, tuple(int(d) for d in dims), type_id, offset
