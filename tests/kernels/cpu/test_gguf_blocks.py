"""Linears on raw GGUF blocks: every type, both native paths, within the error budget of
their int8 activations (and exact in their integers)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from radixlm.kernels.cpu.gguf_blocks import (
    GGUFBlockLinear,
    gguf_block_dequantize,
    gguf_block_linear,
    gguf_block_types,
    gguf_blocks_vnni,
)
from radixlm.kernels.reference.gguf_blocks import (
    GGUF_BLOCKS,
    gguf_dequantize,
    gguf_linear_ref,
    random_gguf_raw,
)

TYPES = gguf_block_types()
TINY = 2.0**-100  # activation blocks below it quantize to 0


def _quantized_x(x: torch.Tensor, block: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The kernels' activations, reproduced: (dx X as float64 ``[T, K]``, the step bound
    ``|x - dx X|`` per element): X = round-half-even(x 127 / max|x|) per block."""
    t, k = x.shape
    xb = x.view(t, k // block, block)
    amax = xb.abs().amax(-1, keepdim=True)
    live = amax >= TINY
    inv = torch.where(live, 127.0 / amax, torch.zeros_like(amax))  # float32 as in C
    dx = torch.where(live, amax / 127.0, torch.zeros_like(amax))
    codes = torch.round(xb * inv).clamp(-127, 127)
    step = torch.where(live, dx.double() / 2 * (1 + 2.0**-20), amax.double())
    step = step.expand(t, k // block, block).reshape(t, k)
    return (codes.double() * dx.double()).view(t, k), step


def _budgets(x: torch.Tensor, w: torch.Tensor, type_name: str):
    """(kernel vs the product of its own int8 activations, kernel vs float x @ W.T):
    float32 rounding 2^-20 of sum |w| |x|; plus the activation rounding sum |w| |x - dx X|."""
    xq, step = _quantized_x(x, GGUF_BLOCKS[type_name].elems)
    wa = w.double().abs()
    rounding = 2.0**-20 * (x.double().abs() @ wa.T) + 1e-30
    return xq, rounding, rounding + step @ wa.T


@pytest.mark.parametrize("type_name", TYPES)
@pytest.mark.parametrize("t", [1, 3, 8, 13, 17, 33, 64])
@pytest.mark.parametrize("tiles", [False, True])  # above 8 rows on VNNI: the tiled kernel
def test_matches_the_reference_within_the_activation_budget(type_name, native_path, t, tiles):
    elems = GGUF_BLOCKS[type_name].elems
    gen = torch.Generator().manual_seed(100 * TYPES.index(type_name) + t)
    n, cols = 37 + 8 * (t % 3), elems * (3 if elems == 256 else 9)
    raw = random_gguf_raw(type_name, n, cols, gen)
    x = torch.randn(t, cols, generator=gen) * torch.rand(t, 1, generator=gen) * 4
    x[0, :elems] *= 1e-3  # one block far smaller than the rest of its row
    y = gguf_block_linear(x, raw, type_name, cols, path=native_path, tiles=tiles)
    w = gguf_dequantize(raw, type_name, cols)
    xq, rounding, budget = _budgets(x, w, type_name)
    assert y.dtype == torch.float32 and y.shape == (t, n)
    # exact integers: the kernel is the product of its own activations up to float rounding
    assert bool(((y.double() - xq @ w.double().T).abs() <= rounding).all())
    err = (y.double() - x.double() @ w.double().T).abs()
    assert bool((err <= budget).all()), f"worst error / budget {(err / budget).max():.3g}"


@pytest.mark.parametrize("type_name", TYPES)
def test_native_paths_agree(type_name):
    if not gguf_blocks_vnni():
        pytest.skip("gguf_blocks: no AVX-512 VNNI path")
    gen = torch.Generator().manual_seed(5)
    cols = GGUF_BLOCKS[type_name].elems * 5
    raw = random_gguf_raw(type_name, 19, cols, gen)
    x = torch.randn(11, cols, generator=gen)
    fast, plain = (gguf_block_linear(x, raw, type_name, cols, path=p) for p in
                   ("vnni", "portable"))
    scale = x.abs() @ gguf_dequantize(raw, type_name, cols).abs().T
    assert bool(((fast - plain).abs() <= 2.0**-20 * scale).all())


@pytest.mark.parametrize("type_name", TYPES)
# one pass of tiles; a pass of 32 and one of 8; 100: passes from rows 32, 64 and 96 (4 rows)
@pytest.mark.parametrize("t", [9, 40, 100])
def test_tiles_match_the_passes_of_8(type_name, t):
    """Above 8 rows the tiled kernel sums the same exact integers per sub-block (block) as
    the passes of 8, in other float lanes: equal up to float32 rounding."""
    if not gguf_blocks_vnni():
        pytest.skip("gguf_blocks: no AVX-512 VNNI path")
    gen = torch.Generator().manual_seed(7 + t)
    # K-quants: 17 super-blocks (4 KiB rows of activations); 32-weight types: 2 groups of 8
    # blocks and 3 more (a group's lanes left empty)
    cols = GGUF_BLOCKS[type_name].elems * (17 if GGUF_BLOCKS[type_name].elems == 256 else 19)
    raw = random_gguf_raw(type_name, 23, cols, gen)
    x = torch.randn(t, cols, generator=gen)
    tiled, passes = (gguf_block_linear(x, raw, type_name, cols, path="vnni", tiles=tiles)
                     for tiles in (True, False))
    scale = x.abs() @ gguf_dequantize(raw, type_name, cols).abs().T
    assert bool(((tiled - passes).abs() <= 2.0**-20 * scale).all())
    # each row as in a call of its own tiled rows: a row's result does not depend on the others
    again = gguf_block_linear(x.flip(0), raw, type_name, cols, path="vnni", tiles=True)
    again = again.flip(0)
    assert torch.equal(again, tiled)


# blocks a row: the 32-weight types' groups of 16 blocks (full, and a last one on 16, 8 or 4
# lanes: 17 = 16 + 1, 20 = 16 + 4, 21 = 16 + 5, 25 = 16 + 9, 1, 5, 9, 33); K-quants 1-5
@pytest.mark.parametrize("type_name,blocks", [
    (name, blocks) for name in TYPES
    for blocks in ([1, 4, 5, 9, 16, 17, 20, 21, 25, 33] if GGUF_BLOCKS[name].elems == 32
                   else [1, 2, 3, 5])])
def test_tiles_at_odd_sizes(type_name, blocks):
    """The tiles at every ragged last group: within the activation budget of the reference,
    equal to the passes of 8 up to float32 rounding, each row independent of the others."""
    if not gguf_blocks_vnni():
        pytest.skip("gguf_blocks: no AVX-512 VNNI path")
    elems = GGUF_BLOCKS[type_name].elems
    gen = torch.Generator().manual_seed(blocks)
    cols, t = elems * blocks, 13 + blocks
    raw = random_gguf_raw(type_name, 7 + blocks % 4, cols, gen)
    x = torch.randn(t, cols, generator=gen) * torch.rand(t, 1, generator=gen) * 4
    tiled, passes = (gguf_block_linear(x, raw, type_name, cols, path="vnni", tiles=tiles)
                     for tiles in (True, False))
    plain = gguf_block_linear(x, raw, type_name, cols, path="portable")
    w = gguf_dequantize(raw, type_name, cols)
    _, _, budget = _budgets(x, w, type_name)
    assert bool(((tiled.double() - x.double() @ w.double().T).abs() <= budget).all())
    scale = x.abs() @ w.abs().T  # the same integers as the passes and the portable path
    assert bool(((tiled - passes).abs() <= 2.0**-20 * scale).all())
    assert bool(((tiled - plain).abs() <= 2.0**-20 * scale).all())
    again = gguf_block_linear(x.flip(0), raw, type_name, cols, path="vnni", tiles=True)
    assert torch.equal(again.flip(0), tiled)


# K-quant calls of up to 32 rows (batched decode) run the super-blocks over the rows with the
# products d dx 16 rows a multiply; above 32 rows the rows over the super-blocks (up to 16 of
# them). Row counts around 4 (a row step), 16 (a multiply of products) and 32; widths of 1, 3
# and 17 super-blocks (17: wide at any row count)
@pytest.mark.parametrize("type_name", [n for n in TYPES if GGUF_BLOCKS[n].elems == 256])
@pytest.mark.parametrize("blocks", [1, 3, 17])
def test_k_quant_batched_decode_rows_are_the_prefill_rows(type_name, blocks):
    """Each row of a K-quant call of 4..32 rows is bit for bit that row in a call of 41 rows
    and within the activation budget of the reference."""
    if not gguf_blocks_vnni():
        pytest.skip("gguf_blocks: no AVX-512 VNNI path")
    gen = torch.Generator().manual_seed(blocks + 3 * len(type_name))
    cols = 256 * blocks
    raw = random_gguf_raw(type_name, 11, cols, gen)  # odd output rows: a last lone column
    x = torch.randn(41, cols, generator=gen) * torch.rand(41, 1, generator=gen) * 4
    x[5, : cols // 2] = 0.0  # super-blocks of zeros (dx 0)
    whole = gguf_block_linear(x, raw, type_name, cols, path="vnni", tiles=True)
    for rows in (4, 5, 13, 16, 17, 31, 32):
        part = gguf_block_linear(x[:rows], raw, type_name, cols, path="vnni", tiles=True)
        assert torch.equal(part.view(torch.int32), whole[:rows].view(torch.int32)), rows
    w = gguf_dequantize(raw, type_name, cols)
    _, _, budget = _budgets(x, w, type_name)
    assert bool(((whole.double() - x.double() @ w.double().T).abs() <= budget).all())


@pytest.mark.parametrize("type_name", TYPES)
def test_native_dequantize_is_bit_equal(type_name):
    gen = torch.Generator().manual_seed(9)
    cols = GGUF_BLOCKS[type_name].elems * 3
    raw = random_gguf_raw(type_name, 21, cols, gen)
    ref = gguf_dequantize(raw, type_name, cols)
    assert torch.equal(gguf_block_dequantize(raw, type_name, cols), ref)
    assert torch.equal(gguf_block_dequantize(raw, type_name, cols, 5, 7), ref[5:12])
    out = torch.full((7, cols), float("nan"))
    assert gguf_block_dequantize(raw, type_name, cols, 5, 7, out=out) is out
    assert torch.equal(out, ref[5:12])
    assert torch.equal(_portable_dequantize(raw, type_name, cols), ref)


@pytest.mark.parametrize("type_name", TYPES)
def test_native_dequantize_of_any_bytes(type_name):
    """Fully random bytes (subnormal, huge, inf, nan float16 scales): as the reference."""
    geo = GGUF_BLOCKS[type_name]
    raw = torch.randint(0, 256, (11, 3 * geo.nbytes), dtype=torch.uint8,
                        generator=torch.Generator().manual_seed(8))
    ref = gguf_dequantize(raw, type_name, 3 * geo.elems)
    for w in (gguf_block_dequantize(raw, type_name, 3 * geo.elems),
              _portable_dequantize(raw, type_name, 3 * geo.elems)):
        assert torch.equal(w.isnan(), ref.isnan())
        assert torch.equal(w.nan_to_num(), ref.nan_to_num())


def _portable_dequantize(raw: torch.Tensor, type_name: str, cols: int) -> torch.Tensor:
    """The native module's plain-C decoder (what a CPU without AVX-512 runs)."""
    import radixlm.kernels.cpu.gguf_blocks as launcher
    if launcher._lib is None:
        pytest.skip("gguf_blocks is not built")
    out = torch.empty(raw.shape[0], cols)
    launcher._lib.dequantize(raw.data_ptr(), raw.stride(0), 0, raw.shape[0], cols,
                             launcher._TYPE_IDS[type_name], out.data_ptr(), False)
    return out


@pytest.mark.parametrize("type_name", ["Q4_0", "Q6_K"])
def test_prefill_tiles_match_the_float_product(type_name):
    gen = torch.Generator().manual_seed(4)
    cols = GGUF_BLOCKS[type_name].elems * 2
    raw = random_gguf_raw(type_name, 45, cols, gen)
    x = torch.randn(41, cols, generator=gen)
    ref = gguf_linear_ref(x, raw, type_name, cols)
    scale = x.abs() @ gguf_dequantize(raw, type_name, cols).abs().T
    y = gguf_block_linear(x, raw, type_name, cols, path="tiled")
    assert bool(((y - ref).abs() <= 2.0**-18 * scale).all())


@pytest.mark.parametrize("t", [3, 17])  # 17: the tiles
def test_non_finite_rows_give_nan_rows(native_path, t):
    gen = torch.Generator().manual_seed(1)
    raw = random_gguf_raw("Q4_K", 17, 512, gen)
    x = torch.randn(t, 512, generator=gen)
    x[1, 300] = float("inf")
    y = gguf_block_linear(x, raw, "Q4_K", 512, path=native_path, tiles=True)
    assert bool(y[1].isnan().all()) and bool(y[[0, 2]].isfinite().all())


def test_linear_module_keeps_the_mapped_bytes(tmp_path):
    gen = torch.Generator().manual_seed(2)
    raw = random_gguf_raw("Q5_K", 23, 768, gen)
    path = tmp_path / "w.bin"
    path.write_bytes(raw.numpy().tobytes())
    mapped = np.memmap(path, dtype=np.uint8, mode="r", shape=tuple(raw.shape))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns on a read-only array
        view = torch.from_numpy(mapped)
    bias = torch.randn(23, generator=gen)
    layer = GGUFBlockLinear(view, "Q5_K", 768, bias=bias)
    assert layer.raw.data_ptr() == view.data_ptr() and layer.rows == 23
    assert layer.nbytes == raw.numel() + 4 * 23
    x = torch.randn(2, 768, generator=gen)
    ref = GGUFBlockLinear(raw, "Q5_K", 768, path="reference")(x) + bias
    xq, rounding, budget = _budgets(x, gguf_dequantize(raw, "Q5_K", 768), "Q5_K")
    assert bool(((layer.forward(x) - ref).abs() <= budget.float()).all())
    assert set(gguf_block_types()) == set(GGUF_BLOCKS)


def test_argument_checks():
    gen = torch.Generator().manual_seed(3)
    raw = random_gguf_raw("Q8_0", 5, 64, gen)
    with pytest.raises(ValueError, match="expected size 64"):
        gguf_block_linear(torch.randn(2, 32), raw, "Q8_0", 64)
    with pytest.raises(TypeError, match="dtype"):
        gguf_block_linear(torch.randn(2, 64).double(), raw, "Q8_0", 64)
    with pytest.raises(TypeError, match="uint8"):
        GGUFBlockLinear(raw.view(torch.int8), "Q8_0", 64)
    with pytest.raises(ValueError, match="needs"):
        GGUFBlockLinear(raw, "Q4_0", 64)
    with pytest.raises(ValueError, match="unsupported"):
        GGUFBlockLinear(raw, "IQ4_NL", 64)
    with pytest.raises(ValueError, match="contiguous"):
        GGUFBlockLinear(torch.randint(0, 255, (68, 5), dtype=torch.uint8).T, "Q8_0", 64)
    with pytest.raises(ValueError, match="path"):
        gguf_block_linear(torch.randn(2, 64), raw, "Q8_0", 64, path="gpu")


def test_without_the_module_the_reference_runs(monkeypatch):
    import radixlm.kernels.cpu.gguf_blocks as launcher
    monkeypatch.setattr(launcher, "_lib", None)
    gen = torch.Generator().manual_seed(6)
    raw = random_gguf_raw("Q6_K", 7, 256, gen)
    x = torch.randn(2, 256, generator=gen)
    ref = gguf_linear_ref(x, raw, "Q6_K", 256)
    assert torch.equal(GGUFBlockLinear(raw, "Q6_K", 256)(x), ref)
    assert torch.equal(launcher.gguf_block_dequantize(raw, "Q6_K", 256),
                       gguf_dequantize(raw, "Q6_K", 256))
    with pytest.raises(RuntimeError, match="not built"):
        GGUFBlockLinear(raw, "Q6_K", 256, path="portable")
