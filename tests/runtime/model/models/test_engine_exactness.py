"""Every served family through the Engine against transformers: greedy tokens and per-token
logprobs, radix cache cold then warm, at page sizes 1 and 16 (``check_engine_against_hf`` in
conftest.py). Families that differ from a tiny checkpoint only in config (Mistral's window
shorter than the prompts, Llama 3.x RoPE past its original context) run as its variants. The
GGUF loaders new to a family (Phi-3's fused tensors, Llama 3.x's ``rope_freqs``) run once each
from a file written as llama.cpp writes it, one at each page size."""

from __future__ import annotations

from pathlib import Path

import pytest

from radixlm.testing.llama_cpp_writer import write_like_llama_cpp

FAMILIES = ["llama", "qwen2", "qwen3", "phi3"]  # tiny checkpoints (tests/conftest.py)
VARIANTS = ["mistral-window", "llama3-rope"]  # radixlm.testing.config_variants


def checkpoint(request: pytest.FixtureRequest, family: str) -> Path:
    """The tiny checkpoint (or config variant) named ``family``."""
    if family in VARIANTS:
        return request.getfixturevalue("tiny_variant_path")(family)
    return request.getfixturevalue(f"tiny_{family}_path")


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("family", FAMILIES + VARIANTS)
def test_engine_greedy_and_logprobs_match_hf(request, check_engine_against_hf, family,
                                             page_size):
    check_engine_against_hf(checkpoint(request, family), page_size)


@pytest.mark.parametrize(("family", "page_size"), [("phi3", 1), ("llama3-rope", 16)])
def test_engine_on_a_gguf_matches_hf(request, check_engine_against_hf, tmp_path, monkeypatch,
                                     family, page_size):
    folder = checkpoint(request, family)
    write_like_llama_cpp(folder, tmp_path / "m.gguf", "F32")
    monkeypatch.setenv("RADIXLM_CACHE_DIR", str(tmp_path / "cache"))  # the engine converts
    check_engine_against_hf(tmp_path / "m.gguf", page_size, hf_path=folder)
