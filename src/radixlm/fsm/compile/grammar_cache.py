"""Caches of compiled grammars: in memory (LRU, errors included) and on disk (masks).

The disk cache stores, per (spec, vocabulary) key, the token masks computed at compile time,
each under the byte path that reaches its state from the start. Loading walks the paths again
(cheap) and installs the masks, which are the expensive part on large vocabularies. Files are
written atomically (temporary file, then rename), one file per key, so concurrent processes
never see a torn write; an unreadable file is ignored and rewritten.
"""

from __future__ import annotations

import logging
import os
import tempfile
from collections import OrderedDict
from pathlib import Path
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)

DISK_FORMAT_VERSION = 1


class MemoryCache:
    """Bounded LRU map from key to a compiled grammar or the error it raised."""

    def __init__(self, capacity: int = 256) -> None:
        if capacity < 1:
            raise ValueError(f"cache capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self._items: OrderedDict[str, Any] = OrderedDict()

    def get(self, key: str) -> Any | None:
        """The entry, marked most recently used; None when absent."""
        item = self._items.get(key)
        if item is not None:
            self._items.move_to_end(key)
        return item

    def put(self, key: str, item: Any) -> None:
        """Insert, evicting the least recently used entry past capacity."""
        self._items[key] = item
        self._items.move_to_end(key)
        while len(self._items) > self.capacity:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class DiskMaskCache:
    """Token masks of warmed-up states, one ``.npz`` file per key."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    def _path(self, key: str) -> Path:
        return self.root / f"grammar-{key}.npz"

    def load(self, key: str) -> list[tuple[bytes, np.ndarray]]:
        """(byte path from the start state, mask words) pairs; [] when absent or unreadable."""
        path = self._path(key)
        if not path.exists():
            return []
        try:
            with np.load(path, allow_pickle=False) as data:
                if int(data["version"]) != DISK_FORMAT_VERSION:
                    return []
                blob, offsets, masks = data["paths"], data["offsets"], data["masks"]
                raw = blob.tobytes()
                return [(raw[offsets[i]:offsets[i + 1]], masks[i]) for i in range(len(masks))]
        except Exception as exc:  # a torn or foreign file must never break compilation
            logger.warning("ignoring unreadable grammar cache file %s: %s", path, exc)
            return []

    def store(self, key: str, entries: list[tuple[bytes, np.ndarray]]) -> None:
        """Write atomically; errors are logged, never raised."""
        if not entries:
            return
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            offsets = np.zeros(len(entries) + 1, dtype=np.int64)
            for i, (p, _) in enumerate(entries):
                offsets[i + 1] = offsets[i] + len(p)
            blob = np.frombuffer(b"".join(p for p, _ in entries) or b"\0", dtype=np.uint8)
            masks = np.stack([m for _, m in entries]).astype(np.int32)
            fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-", suffix=".npz")
            with os.fdopen(fd, "wb") as f:
                np.savez(f, version=np.int64(DISK_FORMAT_VERSION), paths=blob,
                         offsets=offsets, masks=masks)
            os.replace(tmp, self._path(key))
        except OSError as exc:
            logger.warning("could not write grammar cache for %s: %s", key, exc)
