"""A GGUF file as a small local Hugging Face folder (config and tokenizer), made once and cached.

The tokenizer manager and the detokenizer (other processes) and the pool sizing read a model
from a folder. Rather than teach each of them GGUF, :func:`resolve_model_path` turns a
``.gguf`` path into such a folder under ``$RADIXLM_CACHE_DIR/gguf/<stem>-<key>/``:

* ``config.json``: the architecture from the GGUF metadata;
* tokenizer files: transformers' GGUF-to-tokenizer conversion, with the chat template and
  special tokens from the metadata;
* ``gguf_source.json``: the GGUF it describes (:func:`gguf_source`). The weights stay in the
  GGUF: the model runner reads them from the file's memory map (``gguf_weights.py``), so the
  folder is a few MiB whatever the model's size.

The key hashes the GGUF's absolute path, size and mtime (and this converter's version), so an
edited file converts again. Conversion writes a temporary folder and renames it, so a crash
or a concurrent start never leaves a half-written cache entry behind. Version 1 folders also
held every tensor dequantized to float32 (``model.safetensors``, ~4x the file); they still
load (their GGUF is found from the safetensors metadata), and the first version-2 conversion
of the same file removes them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from .unsupported_model import UnsupportedModelError

if TYPE_CHECKING:  # the reader imports the fsm and the kernels (torch): only to convert
    from .gguf_checkpoint import GGUFCheckpoint

logger = logging.getLogger(__name__)
CONVERTER_VERSION = 2  # 2: no float32 weights in the folder
SOURCE_FILE = "gguf_source.json"


def _say(message: str) -> None:
    """Progress for a person watching start-up (stderr, unbuffered), and the log."""
    print(f"radixlm: {message}", file=sys.stderr, flush=True)
    logger.debug(message)


def find_gguf(path: str | Path) -> Path | None:
    """The GGUF file ``path`` names (a ``.gguf`` file, or a folder holding exactly one and no
    ``config.json``), else None for an ordinary checkpoint folder."""
    p = Path(path)
    if p.suffix.lower() == ".gguf":
        return p
    if not p.is_dir() or (p / "config.json").is_file():
        return None
    found = sorted(p.glob("*.gguf"))
    if len(found) > 1:
        raise UnsupportedModelError(
            f"{p} holds several GGUF files ({[f.name for f in found]}); pass one file as "
            f"--model-path")
    return found[0] if found else None


def cache_key(gguf_path: Path) -> str:
    st = gguf_path.stat()
    raw = f"{gguf_path.resolve()}|{st.st_size}|{st.st_mtime_ns}|v{CONVERTER_VERSION}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def converted_folder(gguf_path: Path, cache_root: Path) -> Path:
    """Where the conversion of ``gguf_path`` lives (whether or not it exists yet)."""
    return cache_root / f"{gguf_path.stem}-{cache_key(gguf_path)}"


def default_cache_root() -> Path:
    from ... import env

    return env.cache_dir() / "gguf"


def resolve_model_path(path: str | Path, cache_root: Path | None = None,
                       need_tokenizer: bool = True) -> Path:
    """A folder the runtime can load: ``path`` itself, or the cached conversion of its GGUF.

    ``need_tokenizer=False`` (a separate ``--tokenizer-path`` was given) accepts a GGUF
    without tokenizer metadata.
    """
    gguf_path = find_gguf(path)
    if gguf_path is None:
        return Path(path)
    return ensure_converted(gguf_path, cache_root or default_cache_root(), need_tokenizer)


def ensure_converted(gguf_path: Path, cache_root: Path, need_tokenizer: bool = True) -> Path:
    """Convert ``gguf_path`` into ``cache_root`` unless a finished conversion is there."""
    out = converted_folder(gguf_path, cache_root)
    if (out / "config.json").is_file():
        if need_tokenizer and not (out / "tokenizer_config.json").is_file():
            _checkpoint(gguf_path).require_tokenizer()
        logger.info("using the GGUF's config and tokenizer cached at %s", out)
        return out
    ckpt = _checkpoint(gguf_path)
    if need_tokenizer:
        ckpt.require_tokenizer()
    write_atomically(out, "config.json", lambda tmp: _convert(ckpt, tmp))
    _remove_float32_conversions(gguf_path, cache_root, out)
    return out


def _checkpoint(gguf_path: Path) -> GGUFCheckpoint:
    """The file's reader, imported here: a cached folder needs none (the user's process)."""
    from .gguf_checkpoint import GGUFCheckpoint

    return GGUFCheckpoint(gguf_path)


def write_atomically(out: Path, marker: str, write: Callable[[Path], None]) -> None:
    """Fill a fresh temporary folder beside ``out`` with ``write`` and rename it to ``out``,
    so a crash or a concurrent start never leaves a half-written cache entry behind (a
    concurrent writer that finished first, leaving ``out / marker``, wins)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.parent / f".{out.name}.{os.getpid()}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        write(tmp)
        try:
            tmp.rename(out)
        except OSError:  # another process finished first; its copy is as good as ours
            if not (out / marker).is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _convert(ckpt: GGUFCheckpoint, folder: Path) -> None:
    start = time.perf_counter()
    _say(f"reading {ckpt.path} ({ckpt.path.stat().st_size / 2**20:.0f} MiB, "
         f"{ckpt.architecture}, {ckpt.num_tensors} tensors): config and tokenizer into "
         f"{folder.parent} (the weights stay in the file, memory-mapped at load) ...")
    (folder / "config.json").write_text(json.dumps(ckpt.hf_config(), indent=2))
    if ckpt.has_tokenizer():
        _write_tokenizer(ckpt, folder)
    st = ckpt.path.stat()
    (folder / SOURCE_FILE).write_text(json.dumps(
        {"source": str(ckpt.path.resolve()), "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    _say(f"GGUF config and tokenizer ready in {time.perf_counter() - start:.1f} s (cached)")


def gguf_source(model_folder: str | Path) -> Path | None:
    """The GGUF a cached folder describes (``gguf_source.json``, or a version-1 folder's
    safetensors metadata), when it still exists; None for any other folder."""
    folder = Path(model_folder)
    marker = folder / SOURCE_FILE
    if marker.is_file():
        source = json.loads(marker.read_text()).get("source")
    else:
        source = _safetensors_source(folder)
    return Path(source) if source and Path(source).is_file() else None


def _safetensors_source(folder: Path) -> str | None:
    path = folder / "model.safetensors"
    if not path.is_file():
        return None
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        return (f.metadata() or {}).get("source")


def _remove_float32_conversions(gguf_path: Path, cache_root: Path, keep: Path) -> None:
    """Delete version-1 folders of ``gguf_path`` (float32 copies of every tensor) beside
    ``keep``: nothing reads them once the file is mapped."""
    for old in cache_root.glob(f"{gguf_path.stem}-*"):
        if old == keep or not (old / "model.safetensors").is_file():
            continue
        source = _safetensors_source(old)
        if source is None or Path(source).resolve() != gguf_path.resolve():
            continue
        size = sum(f.stat().st_size for f in old.iterdir() if f.is_file())
        shutil.rmtree(old, ignore_errors=True)
        _say(f"removed {old} ({size / 2**20:.0f} MiB): an older float32 conversion of this "
             f"file, no longer used (its weights are read from the GGUF itself)")


def _write_tokenizer(ckpt: GGUFCheckpoint, folder: Path) -> None:
    from .gguf_tokenizer_conversion import write_tokenizer

    write_tokenizer(ckpt.path, folder, ckpt.field("tokenizer.ggml.model"), ckpt.chat_template)
