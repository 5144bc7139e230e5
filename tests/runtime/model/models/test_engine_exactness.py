"""Every served family through the Engine against transformers: greedy tokens and per-token
logprobs, radix cache cold then warm, at page sizes 1 and 16 (``check_engine_against_hf`` in
conftest.py). Families that differ from a tiny checkpoint only in config (Mistral's window
shorter than the prompts, Llama 3.x RoPE past its original context) run as its variants."""

from __future__ import annotations

import pytest

FAMILIES = ["llama", "qwen2", "qwen3", "phi3"]  # tiny checkpoints (tests/conftest.py)
VARIANTS = ["mistral-window", "llama3-rope"]  # radixlm.testing.config_variants


@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("family", FAMILIES + VARIANTS)
def test_engine_greedy_and_logprobs_match_hf(request, check_engine_against_hf, family,
                                             page_size):
    if family in VARIANTS:
        path = request.getfixturevalue("tiny_variant_path")(family)
    else:
        path = request.getfixturevalue(f"tiny_{family}_path")
    check_engine_against_hf(path, page_size)
