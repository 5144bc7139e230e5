"""One native call for a fused projection's pieces: bit-equal to the pieces one by one
(concatenated, gathered by row_order), every type, both native paths, mixed block sizes."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.gguf_blocks import GGUFBlockLinear, gguf_blocks_built
from radixlm.kernels.cpu.gguf_blocks_fused import GGUFFusedBlocks
from radixlm.kernels.reference.gguf_blocks import random_gguf_raw
from radixlm.runtime.model.gguf_fused_linear import GGUFFusedLinear

# (piece types, input width): one type, Q4_K_M's mixes of block sizes 256 and 32
MIXES = [(("Q4_1", "Q4_1", "Q4_1"), 96), (("Q8_0",), 160), (("Q4_0", "Q5_0"), 64),
         (("Q4_K", "Q4_K", "Q6_K"), 512), (("Q5_K", "Q8_0"), 256), (("Q6_K", "Q5_0"), 256)]


def _pieces(types, cols, path, gen, tiles=False):
    return [GGUFBlockLinear(random_gguf_raw(t, rows, cols, gen), t, cols, path=path, tiles=tiles)
            for t, rows in zip(types, (13, 7, 5))]


@pytest.mark.parametrize("types,cols", MIXES)
@pytest.mark.parametrize("permuted", [False, True])
@pytest.mark.parametrize("tiles", [False, True])  # the pieces' choice, kept by the one call
def test_one_call_is_bit_equal_to_the_pieces(types, cols, native_path, permuted, tiles):
    gen = torch.Generator().manual_seed(len(types) * cols + permuted)
    pieces = _pieces(types, cols, native_path, gen, tiles)
    width = sum(p.rows for p in pieces)
    order = torch.randperm(width, generator=gen) if permuted else None
    fused = GGUFFusedBlocks(pieces, order)
    for t in (1, 2, 3, 9, 17, 40):  # 40: a pass of 32 rows and one of 8
        x = torch.randn(t, cols, generator=gen)
        cat = torch.cat([p.forward(x) for p in pieces], dim=1)
        expected = cat if order is None else cat[:, order]
        assert torch.equal(fused(x), expected)


def test_fused_linear_takes_the_one_call_path(native_path):
    gen = torch.Generator().manual_seed(3)
    pieces = _pieces(("Q4_K", "Q4_K", "Q6_K"), 256, native_path, gen)
    width = sum(p.rows for p in pieces)
    bias = torch.randn(width, generator=gen)
    module = GGUFFusedLinear(pieces, torch.randperm(width, generator=gen), bias)
    assert module._fused is not None
    x = torch.randn(4, 256, generator=gen)
    assert torch.equal(module(x), module.forward_pieces(x))
    x16 = x.to(torch.bfloat16)  # other dtypes: the pieces path, in the input's dtype
    assert module(x16).dtype == torch.bfloat16


def test_nonfinite_rows_are_nan():
    if not gguf_blocks_built():
        pytest.skip("gguf_blocks is not built")
    gen = torch.Generator().manual_seed(4)
    pieces = _pieces(("Q4_1", "Q6_K"), 256, "portable", gen)
    x = torch.randn(3, 256, generator=gen)
    x[1, 7] = float("inf")
    y = GGUFFusedBlocks(pieces, None)(x)
    assert bool(y[1].isnan().all()) and not bool(y[[0, 2]].isnan().any())


def test_rejects_bad_arguments():
    if not gguf_blocks_built():
        pytest.skip("gguf_blocks is not built")
    gen = torch.Generator().manual_seed(5)
    pieces = _pieces(("Q4_1", "Q4_1"), 64, "portable", gen)
    with pytest.raises(ValueError, match="permutation"):
        GGUFFusedBlocks(pieces, torch.zeros(20, dtype=torch.int64))
    with pytest.raises(ValueError, match="expected float32"):
        GGUFFusedBlocks(pieces, None)(torch.randn(2, 32))
    other = _pieces(("Q4_1",), 96, "portable", gen)
    assert not GGUFFusedBlocks.supports(pieces + other)
