"""The GGUF block reference decodes every type bit-equal to ``gguf.quants.dequantize``."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.kernels.reference.gguf_blocks import (
    GGUF_BLOCKS,
    gguf_dequantize,
    gguf_linear_ref,
    gguf_row_bytes,
    random_gguf_raw,
)

gguf = pytest.importorskip("gguf")
from gguf.quants import dequantize  # noqa: E402

TYPES = sorted(GGUF_BLOCKS)


def _gguf_reference(raw: torch.Tensor, type_name: str) -> torch.Tensor:
    qtype = gguf.GGMLQuantizationType[type_name]
    with np.errstate(all="ignore"):  # inf/nan scales in the fully random bytes
        return torch.from_numpy(np.ascontiguousarray(dequantize(raw.numpy(), qtype)))


def test_geometry_matches_gguf():
    for name, geo in GGUF_BLOCKS.items():
        assert gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType[name]] == (geo.elems, geo.nbytes)


@pytest.mark.parametrize("type_name", TYPES)
@settings(max_examples=12, deadline=None)
@given(rows=st.integers(1, 9), blocks=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_bit_equal_to_gguf(type_name, rows, blocks, seed):
    cols = blocks * GGUF_BLOCKS[type_name].elems
    raw = random_gguf_raw(type_name, rows, cols, torch.Generator().manual_seed(seed))
    assert raw.shape == (rows, gguf_row_bytes(type_name, cols))
    w = gguf_dequantize(raw, type_name, cols)
    assert w.dtype == torch.float32 and w.shape == (rows, cols)
    ref = _gguf_reference(raw, type_name)
    assert torch.equal(w.view(torch.int32), ref.view(torch.int32))  # bit for bit


@pytest.mark.parametrize("type_name", TYPES)
def test_any_scale_bytes_decode_like_gguf(type_name):
    """Fully random bytes (f16 scales too: subnormal, huge, inf, nan): NaN where gguf has it."""
    geo = GGUF_BLOCKS[type_name]
    gen = torch.Generator().manual_seed(7)
    raw = torch.randint(0, 256, (13, 3 * geo.nbytes), dtype=torch.uint8, generator=gen)
    w, ref = gguf_dequantize(raw, type_name, 3 * geo.elems), _gguf_reference(raw, type_name)
    assert torch.equal(w.isnan(), ref.isnan())
    assert torch.equal(w.nan_to_num(), ref.nan_to_num())


def test_linear_ref_and_checks():
    gen = torch.Generator().manual_seed(3)
    raw = random_gguf_raw("Q4_K", 5, 512, gen)
    x = torch.randn(3, 512, generator=gen)
    y = gguf_linear_ref(x, raw, "Q4_K", 512)
    assert torch.equal(y, x @ gguf_dequantize(raw, "Q4_K", 512).T)
    with pytest.raises(ValueError, match="multiple of 256"):
        gguf_linear_ref(x, raw, "Q4_K", 500)
    with pytest.raises(ValueError, match="unsupported"):
        gguf_dequantize(raw, "IQ2_XS", 512)
    with pytest.raises(ValueError, match="needs"):
        gguf_dequantize(raw[:, :-1], "Q4_K", 512)
