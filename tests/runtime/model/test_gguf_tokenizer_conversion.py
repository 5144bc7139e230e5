"""A GGUF's tokenizer converted alone, once, into the cache (SmolLM2's GGUF; skipped where
its package is absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixlm.default_model import SMOLLM2_PIP, smollm2_gguf_path
from radixlm.runtime.model.gguf_conversion import converted_folder
from radixlm.runtime.model.gguf_tokenizer_conversion import ensure_tokenizer_converted


def test_converted_once_and_the_full_conversion_preferred(tmp_path: Path) -> None:
    gguf = smollm2_gguf_path()
    if gguf is None:
        pytest.skip(f"SmolLM2's GGUF is not installed ({SMOLLM2_PIP})")
    pytest.importorskip("gguf")
    from transformers import AutoTokenizer

    folder = ensure_tokenizer_converted(gguf, tmp_path)
    assert folder.name.endswith(".tokenizer") and not (folder / "config.json").exists()
    stamp = (folder / "tokenizer_config.json").stat().st_mtime_ns
    assert ensure_tokenizer_converted(gguf, tmp_path) == folder  # cached: not written again
    assert (folder / "tokenizer_config.json").stat().st_mtime_ns == stamp
    tok = AutoTokenizer.from_pretrained(folder)
    ref = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    assert tok.encode('{"a": [1, 2]} \u00e9') == ref.encode('{"a": [1, 2]} \u00e9')
    assert tok.chat_template  # the GGUF's chat template came along
    full = converted_folder(gguf, tmp_path)  # a finished full conversion holds one too
    full.mkdir()
    (full / "tokenizer_config.json").write_text("{}")
    assert ensure_tokenizer_converted(gguf, tmp_path) == full
