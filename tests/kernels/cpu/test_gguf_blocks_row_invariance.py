"""A row's result on raw GGUF blocks does not depend on how many rows share the call: bit for
bit the same alone (the 1-row decode kernel), in calls of each of 2..9 rows (with the tiles'
order the few-rows kernel, gguf_blocks_few.h, up to its limit for the type, then the tiles;
else the streaming kernel) and of 9..70 rows (passes of 32 tiles, or of 8), through the
one-matrix and the fused entry points, every type, odd sizes, the VNNI and portable paths.
The runtime's exactness rests on it: a cached prefix's continuation equals the cold run, a
speculative verify's rows equal the one-token steps."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.gguf_blocks import (
    GGUFBlockLinear,
    gguf_block_linear,
    gguf_block_types,
)
from radixlm.kernels.cpu.gguf_blocks_fused import GGUFFusedBlocks
from radixlm.kernels.reference.gguf_blocks import GGUF_BLOCKS, random_gguf_raw

TYPES = gguf_block_types()
# blocks a row: the 32-weight types' groups of 16 blocks (a last one on 4, 8 or 16 lanes,
# decode's groups of 8 and its ragged tail); the K-quants' super-blocks
BLOCKS = {32: (1, 3, 7, 13, 18, 20, 24, 37), 256: (1, 3, 4, 5, 17)}  # 256 x 17: wide
# call sizes: 1 row, each of 2..9 rows (the few-rows kernel's row counts), 9..70 rows (a
# pass of 32 and ragged ones)
SPLITS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 33, 70)


def _bits(y: torch.Tensor) -> torch.Tensor:
    return y.contiguous().view(torch.int32)  # -0.0 and +0.0 differ here


def _in_calls(f, x: torch.Tensor, size: int) -> torch.Tensor:
    """f over x's rows in consecutive calls of ``size`` rows (the last one ragged)."""
    return torch.cat([f(x[i:i + size]) for i in range(0, x.shape[0], size)])


def _activations(rows: int, cols: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.randn(rows, cols, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    x[3, : cols // 2] = 0.0  # a row with blocks of zeros (dx 0)
    return x


@pytest.mark.parametrize("tiles", [True, False])
@pytest.mark.parametrize("type_name,blocks", [
    (name, b) for name in TYPES for b in BLOCKS[GGUF_BLOCKS[name].elems]])
def test_a_rows_bits_do_not_depend_on_the_call(type_name, blocks, tiles, native_path):
    gen = torch.Generator().manual_seed(blocks * 31 + len(type_name))
    cols = GGUF_BLOCKS[type_name].elems * blocks
    raw = random_gguf_raw(type_name, 13 + blocks % 3, cols, gen)  # odd output rows
    x = _activations(70, cols, gen)
    linear = GGUFBlockLinear(raw, type_name, cols, path=native_path, tiles=tiles)
    alone = _bits(_in_calls(linear.forward, x, 1))
    for size in SPLITS[1:]:
        got = _bits(_in_calls(linear.forward, x, size))
        rows = (got != alone).any(1).nonzero().flatten().tolist()
        assert not rows, f"calls of {size} rows: rows {rows} differ from the 1-row calls"
    # the checked entry point (a bfloat16-free float32 copy) agrees with the lean one
    whole = gguf_block_linear(x, raw, type_name, cols, path=native_path, tiles=tiles)
    assert torch.equal(_bits(whole), alone)


@pytest.mark.parametrize("types,cols", [(("Q4_K", "Q4_K", "Q6_K"), 768),
                                        (("Q5_0", "Q8_0", "Q4_1", "Q4_0"), 416),
                                        (("Q5_K", "Q5_0"), 512)])
def test_fused_rows_do_not_depend_on_the_call(types, cols, native_path):
    """The model's fused q|k|v and gate|up calls, tiles on."""
    gen = torch.Generator().manual_seed(cols)
    pieces = [GGUFBlockLinear(random_gguf_raw(t, rows, cols, gen), t, cols, path=native_path,
                              tiles=True) for t, rows in zip(types, (11, 5, 7, 3))]
    width = sum(p.rows for p in pieces)
    fused = GGUFFusedBlocks(pieces, torch.randperm(width, generator=gen))
    x = _activations(45, cols, gen)
    alone = _bits(_in_calls(fused.forward, x, 1))
    for size in (2, 4, 7, 9, 45):
        got = _bits(_in_calls(fused.forward, x, size))
        rows = (got != alone).any(1).nonzero().flatten().tolist()
        assert not rows, f"calls of {size} rows: rows {rows} differ from the 1-row calls"
