"""The per-channel int8 VNNI GEMV equals the float64 product to ~2^-22 of its inputs, on odd
sizes (N not a multiple of the 16-row blocks; K up to the model's 1536, at and past 1024,
where the int32 plane sums stop converting to float32 exactly, and 8192), 1-8 rows and more
(passes of 8)."""

from __future__ import annotations

import pytest
import torch
from kernel_testlib import EXTREME_ROWS, assert_within, extreme_rows, fixed_point_bound, needs_vnni

from radixlm.kernels.cpu.int8_gemv import int8_gemv_reference
from radixlm.kernels.cpu.int8_vnni import (
    MAX_K,
    Int8VnniLinear,
    Int8VnniWeight,
    int8_vnni_supports,
)
from radixlm.kernels.cpu.q4_gemv import PackArena
from radixlm.kernels.cpu.quant_linear import Int8Weight, quantize_int8

pytestmark = needs_vnni()

SHAPES = [(1, 32, 1), (1, 576, 15), (1, 1024, 33), (1, 1056, 16), (1, 1536, 49),
          (2, 1536, 17), (3, 160, 31), (4, 576, 49), (5, 1024, 1), (6, 192, 65), (7, 1536, 3),
          (8, 576, 193), (9, 64, 16), (16, 544, 63), (19, 1536, 40), (33, 8192, 18)]  # (M, K, N)


def _weight(n: int, k: int, gen: torch.Generator) -> Int8Weight:
    codes = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
    return Int8Weight(codes, torch.rand(n, generator=gen) * 0.02 + 1e-4)


def _assert_close(y: torch.Tensor, x: torch.Tensor, weight: Int8Weight) -> None:
    """Within :func:`fixed_point_bound` of the float64 product (three plane conversions and
    the scale are the float32 roundings)."""
    w_abs = weight.codes.double().abs().sum(1) * weight.scales.double()
    ref = int8_gemv_reference(x, weight.codes, weight.scales)
    assert_within(y, ref, fixed_point_bound(x, w_abs))


def _linear(weight: Int8Weight, arena: PackArena | None = None) -> Int8VnniLinear:
    return Int8VnniLinear(Int8VnniWeight.pack(weight, arena))


@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
def test_matches_the_float64_product(m, k, n):
    gen = torch.Generator().manual_seed(m * 7919 + k + n)
    weight = _weight(n, k, gen)
    packed = Int8VnniWeight.pack(weight)
    assert packed.shape == (n, k)
    assert packed.nbytes == -(-n // 16) * (16 * k + 64)  # codes, then 16 float32 scales
    x = torch.randn(m, k, generator=gen) * 3
    y = Int8VnniLinear(packed)(x)
    assert y.shape == (m, n) and y.dtype == torch.float32
    _assert_close(y, x, weight)


@pytest.mark.parametrize("code", [-128, 0, 127])
def test_extreme_codes_are_exact_offsets(code):
    """The +128 offset is undone in integers over the whole row: all-zero codes give exactly
    0, and -128 / 127 everywhere (the int32 sums' largest) meet the bound at K = 1536."""
    gen = torch.Generator().manual_seed(code + 500)
    weight = _weight(29, 1536, gen)
    weight.codes.fill_(code)
    x = torch.randn(4, 1536, generator=gen) * 1e3
    x[1] = x[1].abs()  # same-signed digits: the plane sums' largest magnitudes
    y = _linear(weight)(x)
    if code == 0:
        assert bool((y == 0).all())
    _assert_close(y, x, weight)


@pytest.mark.parametrize("case", ["wide-scales", *EXTREME_ROWS])
def test_extreme_scales_and_activations(case):
    gen = torch.Generator().manual_seed(5)
    weight = _weight(37, 576, gen)
    x = torch.randn(3, 576, generator=gen)
    if case == "wide-scales":  # 2^-20 .. 2^20 per output row
        weight = Int8Weight(weight.codes, torch.exp2(
            torch.randint(-20, 21, (37,), generator=gen).float()))
    else:
        x = extreme_rows(x, case)
    _assert_close(_linear(weight)(x), x, weight)


def test_zero_rows_give_zero_and_a_nonfinite_row_gives_nan_alone():
    gen = torch.Generator().manual_seed(9)
    weight = _weight(20, 64, gen)
    x = torch.randn(4, 64, generator=gen)
    x[1] = 0.0
    x[2, 5] = float("nan")
    y = _linear(weight)(x)
    assert bool((y[1] == 0).all()) and bool(y[2].isnan().all())
    _assert_close(y[[0, 3]], x[[0, 3]], weight)


def test_a_row_does_not_depend_on_its_batch():
    gen = torch.Generator().manual_seed(3)
    linear = _linear(_weight(45, 192, gen))
    x = torch.randn(13, 192, generator=gen)
    full = linear(x)
    for i in (0, 6, 12):  # 1 row takes its own specialised kernel: the same integers
        assert torch.equal(linear(x[i:i + 1].contiguous()), full[i:i + 1])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_low_precision_and_strided_input(dtype):
    gen = torch.Generator().manual_seed(4)
    weight = quantize_int8(torch.randn(33, 96, generator=gen) * 0.05)
    linear = _linear(weight)
    x = torch.randn(2, 96, generator=gen).to(dtype)
    y = linear(x)
    assert y.dtype == dtype
    ref = int8_gemv_reference(x.float(), weight.codes, weight.scales)
    torch.testing.assert_close(y.float(), ref, rtol=2**-7, atol=2**-7 * ref.abs().max().item())
    wide = torch.randn(3, 192, generator=gen)
    assert torch.equal(linear(wide[:, ::2]), linear(wide[:, ::2].contiguous()))


def test_an_arena_packs_the_same_numbers_back_to_back():
    gen = torch.Generator().manual_seed(6)
    arena = PackArena(chunk_bytes=1 << 16)
    weights = [_weight(n, 64, gen) for n in (17, 40, 1100)]  # the last needs its own chunk
    packed = [Int8VnniWeight.pack(w, arena) for w in weights]
    first, second = packed[0].packed, packed[1].packed
    assert second.data_ptr() == first.data_ptr() + -(-first.numel() // 64) * 64
    x = torch.randn(3, 64, generator=gen)
    for w, p in zip(weights, packed):
        assert torch.equal(Int8VnniLinear(p)(x), _linear(w)(x))


def test_unsupported_shapes_and_bad_input_are_refused_with_the_reason():
    gen = torch.Generator().manual_seed(1)
    assert int8_vnni_supports(_weight(4, 64, gen))
    odd = _weight(4, 48, gen)
    assert not int8_vnni_supports(odd)
    with pytest.raises(ValueError, match="multiple of 32"):
        Int8VnniWeight.pack(odd)
    long = Int8Weight(torch.zeros(1, MAX_K + 32, dtype=torch.int8), torch.ones(1))
    assert not int8_vnni_supports(long)
    with pytest.raises(ValueError, match=f"up to {MAX_K}"):
        Int8VnniWeight.pack(long)
    with pytest.raises(TypeError, match="expected an Int8Weight"):
        Int8VnniWeight.pack(torch.zeros(4, 64))
    linear = _linear(_weight(16, 64, gen))
    with pytest.raises(ValueError, match="x: expected size 64 at dim 1"):
        linear(torch.randn(2, 63))
    with pytest.raises(TypeError, match="x: expected dtype"):
        linear(torch.ones(2, 64, dtype=torch.int32))
    with pytest.raises(ValueError, match="x: expected a tensor on cpu"):
        linear(torch.ones(2, 64, device="meta"))
