"""Shared fixtures: the built-in tiny checkpoints, built once per test session (never a hub)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

from radixlm.fsm import TokenVocabulary

# One thread per process: with two, OpenMP spin-waits on this 2-core machine.
torch.set_num_threads(1)
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")


def _build(tmp_path_factory: pytest.TempPathFactory, arch: str) -> Path:
    from radixlm.tiny_model import TinyModelSpec, ensure_tiny_model

    root = tmp_path_factory.getbasetemp() / "tiny-models"
    return ensure_tiny_model(TinyModelSpec(arch=arch, size="test"), root)


@pytest.fixture(scope="session")
def tiny_llama_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Llama test checkpoint (head_dim 16, GQA 2:1, untied)."""
    return _build(tmp_path_factory, "llama")


@pytest.fixture(scope="session")
def tiny_qwen2_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Seeded, untrained Qwen2 test checkpoint (head_dim 32, GQA 4:1, tied, qkv bias)."""
    return _build(tmp_path_factory, "qwen2")


@pytest.fixture(scope="session", params=["llama", "qwen2"])
def tiny_model_path(request: pytest.FixtureRequest) -> Path:
    """Each tiny architecture in turn."""
    return request.getfixturevalue(f"tiny_{request.param}_path")


MODEL_VOCAB = 8192  # the tiny model's padded logits width
EOS_IDS = (1, 4)  # <|end_of_text|>, <|im_end|>


@pytest.fixture(scope="session")
def tokenizer(tiny_llama_path: Path):  # noqa: ANN201
    """The tiny model's byte-level BPE tokenizer (specials 0-4, ~8.1k tokens)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_llama_path)


@pytest.fixture(scope="session")
def vocab(tokenizer) -> TokenVocabulary:  # noqa: ANN001
    """Bytes per token id, padded to the model's 8192 logits, EOS ids 1 and 4."""
    return TokenVocabulary.from_tokenizer(tokenizer, MODEL_VOCAB, EOS_IDS)
