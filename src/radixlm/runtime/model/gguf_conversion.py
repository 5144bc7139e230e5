"""A GGUF file as a local Hugging Face folder, converted once and cached.

Every part of the runtime reads a model from a folder (``config.json``, safetensors,
tokenizer files): the scheduler's :class:`ModelRunner`, the tokenizer manager and the
detokenizer (the latter two in other processes). Rather than teach each of them GGUF,
:func:`resolve_model_path` turns a ``.gguf`` path into such a folder under
``$RADIXLM_CACHE_DIR/gguf/<stem>-<key>/``:

* ``config.json``: the architecture from the GGUF metadata;
* ``model.safetensors``: every tensor dequantized to float32 (the runner casts to its dtype);
* tokenizer files: transformers' GGUF-to-tokenizer conversion, with the chat template and
  special tokens from the metadata.

The key hashes the GGUF's absolute path, size and mtime (and this converter's version), so an
edited file converts again. Conversion writes a temporary folder and renames it, so a crash
or a concurrent start never leaves a half-written cache entry behind.
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

from .gguf_checkpoint import GGUFCheckpoint
from .model_config import UnsupportedModelError

logger = logging.getLogger(__name__)
CONVERTER_VERSION = 1


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
            GGUFCheckpoint(gguf_path).require_tokenizer()
        logger.info("using the converted GGUF cached at %s", out)
        return out
    ckpt = GGUFCheckpoint(gguf_path)
    if need_tokenizer:
        ckpt.require_tokenizer()
    write_atomically(out, "config.json", lambda tmp: _convert(ckpt, tmp))
    return out


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
    _say(f"converting {ckpt.path} ({ckpt.path.stat().st_size / 2**20:.0f} MiB, "
         f"{ckpt.architecture}, {ckpt.num_tensors} tensors) into {folder.parent} ...")
    cfg = ckpt.hf_config()
    (folder / "config.json").write_text(json.dumps(cfg, indent=2))
    _write_weights(ckpt, folder / "model.safetensors", start)
    if ckpt.has_tokenizer():
        t_tok = time.perf_counter()
        _write_tokenizer(ckpt, folder)
        _say(f"  tokenizer converted in {time.perf_counter() - t_tok:.1f} s")
    _say(f"GGUF conversion done in {time.perf_counter() - start:.1f} s (cached for next time)")


def _write_weights(ckpt: GGUFCheckpoint, out: Path, start: float) -> None:
    from safetensors.torch import save_file

    tensors = {}
    total = ckpt.num_tensors
    step = max(total // 4, 1)
    for i, (name, w) in enumerate(ckpt.iter_weights(), 1):
        tensors[name] = w
        if i % step == 0:
            _say(f"  dequantized {i}/{total} tensors ({time.perf_counter() - start:.1f} s)")
    save_file(tensors, str(out), metadata={"format": "pt", "source": str(ckpt.path)})
    size = sum(t.numel() * t.element_size() for t in tensors.values())
    _say(f"  wrote {len(tensors)} float32 tensors ({size / 2**20:.0f} MiB) "
         f"in {time.perf_counter() - start:.1f} s")


def _write_tokenizer(ckpt: GGUFCheckpoint, folder: Path) -> None:
    from .gguf_tokenizer_conversion import write_tokenizer

    write_tokenizer(ckpt.path, folder, ckpt.field("tokenizer.ggml.model"), ckpt.chat_template)
