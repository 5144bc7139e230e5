"""The native grouped int4/int8 VNNI GEMV equals the float64 product to ~2^-22 of its inputs."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_testlib import EXTREME_ROWS, assert_within, extreme_rows, fixed_point_bound, needs_vnni

from radixlm.kernels.cpu.q4_gemv import (
    GROUP,
    GroupedGemvWeight,
    PackArena,
    grouped_gemv_linear,
    grouped_gemv_reference,
    grouped_weight_float64,
)
from radixlm.kernels.cpu.quant_linear import quantize_int4

pytestmark = needs_vnni()

SHAPES = [(1, 32, 1), (1, 576, 17), (2, 64, 31), (3, 96, 33), (4, 576, 577), (5, 1536, 49),
          (6, 128, 15), (7, 320, 129), (8, 576, 960), (11, 64, 23), (17, 96, 47),
          # many passes of 8 rows, a ragged last one
          (21, 1536, 1000), (37, 4096, 45)]  # (M, K, N)


def _weight(n: int, k: int, gen: torch.Generator, half: bool):
    codes = torch.randint(0, 16, (n, k), dtype=torch.uint8, generator=gen)
    scales = torch.rand(n, k // GROUP, generator=gen) * 0.02
    mins = -8 * scales + torch.randn(n, k // GROUP, generator=gen) * 0.01
    if half:  # a GGUF's tables: float16 values
        scales, mins = scales.half().float(), mins.half().float()
    return codes, scales, mins


def _int8_weight(n: int, k: int, gen: torch.Generator, half: bool):
    codes = torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)
    scales = torch.rand(n, k // GROUP, generator=gen) * 0.01
    return codes, (scales.half().float() if half else scales)


def _bound(x: torch.Tensor, codes, scales, mins=None) -> torch.Tensor:
    """``[M, N]`` error budget (:func:`fixed_point_bound`; float32 accumulation over K / 32
    groups)."""
    return fixed_point_bound(x, grouped_weight_float64(codes, scales, mins).abs().sum(1))


_assert_close = assert_within


@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
@pytest.mark.parametrize("half", [False, True], ids=["f32-tables", "f16-tables"])
def test_matches_the_float64_product(m, k, n, half):
    gen = torch.Generator().manual_seed(m * 7919 + k + n)
    codes, scales, mins = _weight(n, k, gen, half)
    weight = GroupedGemvWeight.pack_int4(codes, scales, mins)
    assert weight.half == half and weight.shape == (n, k)
    per_weight = 0.625 if half else 0.75
    assert weight.nbytes == -(-n // 16) * 16 * k * per_weight
    x = torch.randn(m, k, generator=gen) * 3
    y = grouped_gemv_linear(x, weight)
    assert y.shape == (m, n) and y.dtype == torch.float32
    _assert_close(y, grouped_gemv_reference(x, codes, scales, mins), _bound(x, codes, scales, mins))


@pytest.mark.parametrize(("m", "k", "n"), SHAPES)
@pytest.mark.parametrize("half", [False, True], ids=["f32-scales", "f16-scales"])
def test_int8_matches_the_float64_product(m, k, n, half):
    gen = torch.Generator().manual_seed(m * 104729 + k + n)
    codes, scales = _int8_weight(n, k, gen, half)
    weight = GroupedGemvWeight.pack_int8(codes, scales)
    assert (weight.bits, weight.half) == (8, half)
    assert weight.nbytes == -(-n // 16) * 16 * k * (1.0625 if half else 1.125)
    x = torch.randn(m, k, generator=gen) * 3
    y = grouped_gemv_linear(x, weight)
    _assert_close(y, grouped_gemv_reference(x, codes, scales), _bound(x, codes, scales))


@pytest.mark.parametrize("code", [-128, 0, 127])
def test_int8_extreme_codes_are_exact_offsets(code):
    """The +128 offset is undone in integers: all-zero codes give exactly 0, and -128 / 127
    everywhere meet the bound even where the offset term is ~256x the result."""
    gen = torch.Generator().manual_seed(code + 500)
    codes, scales = _int8_weight(29, 128, gen, True)
    codes.fill_(code)
    x = torch.randn(4, 128, generator=gen) * 1e3
    y = grouped_gemv_linear(x, GroupedGemvWeight.pack_int8(codes, scales))
    if code == 0:
        assert bool((y == 0).all())
    _assert_close(y, grouped_gemv_reference(x, codes, scales), _bound(x, codes, scales))


@pytest.mark.parametrize("case", ["codes-0", "codes-15", "wide-scales", *EXTREME_ROWS])
def test_extreme_codes_scales_and_activations(case):
    gen = torch.Generator().manual_seed(5)
    m, k, n = 3, 256, 37
    codes, scales, mins = _weight(n, k, gen, False)
    x = torch.randn(m, k, generator=gen)
    if case == "codes-0":
        codes.zero_()
    elif case == "codes-15":
        codes.fill_(15)
    elif case == "wide-scales":  # 2^-20 .. 2^20, and mins of both signs at that scale
        scales = torch.exp2(torch.randint(-20, 21, scales.shape, generator=gen).float())
        mins = scales * torch.randn(scales.shape, generator=gen) * 8
    elif case in EXTREME_ROWS:
        x = extreme_rows(x, case)
    y = grouped_gemv_linear(x, GroupedGemvWeight.pack_int4(codes, scales, mins))
    _assert_close(y, grouped_gemv_reference(x, codes, scales, mins), _bound(x, codes, scales, mins))


def test_zero_rows_give_zero_and_a_nonfinite_row_gives_nan_alone():
    gen = torch.Generator().manual_seed(9)
    codes, scales, mins = _weight(20, 64, gen, True)
    weight = GroupedGemvWeight.pack_int4(codes, scales, mins)
    x = torch.randn(4, 64, generator=gen)
    x[1] = 0.0
    x[2, 5] = float("inf")
    y = grouped_gemv_linear(x, weight)
    assert bool((y[1] == 0).all()) and bool(y[2].isnan().all())
    ref = grouped_gemv_reference(x[[0, 3]], codes, scales, mins)
    _assert_close(y[[0, 3]], ref, _bound(x[[0, 3]], codes, scales, mins))


def test_a_row_does_not_depend_on_its_batch():
    gen = torch.Generator().manual_seed(3)
    weight = GroupedGemvWeight.pack_int4(*_weight(45, 192, gen, False))
    x = torch.randn(13, 192, generator=gen)
    full = grouped_gemv_linear(x, weight)
    for i in (0, 6, 12):
        assert torch.equal(grouped_gemv_linear(x[i:i + 1].contiguous(), weight), full[i:i + 1])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_low_precision_input_comes_back_in_its_dtype(dtype):
    gen = torch.Generator().manual_seed(4)
    codes, scales, mins = _weight(33, 96, gen, True)
    x = torch.randn(2, 96, generator=gen).to(dtype)
    y = grouped_gemv_linear(x, GroupedGemvWeight.pack_int4(codes, scales, mins))
    assert y.dtype == dtype
    ref = grouped_gemv_reference(x.float(), codes, scales, mins)
    torch.testing.assert_close(y.float(), ref, rtol=2**-7, atol=2**-7 * ref.abs().max().item())


def test_from_int4_is_torch_convention():
    """``(q - 8) * scale + zero`` of :class:`Int4Weight` (group 32) through the kernel equals
    float32 ``F.linear`` on its dequantization to ~float32 rounding."""
    gen = torch.Generator().manual_seed(2)
    q = quantize_int4(torch.randn(70, 160, generator=gen) * 0.05, 32)
    weight = GroupedGemvWeight.from_int4(q.codes, q.scales, q.zeros, q.group_size)
    assert not weight.half  # min/max scales are not float16 values
    x = torch.randn(5, 160, generator=gen)
    ref = torch.nn.functional.linear(x, q.dequantize())
    torch.testing.assert_close(grouped_gemv_linear(x, weight), ref, rtol=1e-5,
                               atol=1e-5 * ref.abs().max().item())


def test_an_arena_packs_the_same_numbers_back_to_back():
    gen = torch.Generator().manual_seed(6)
    arena = PackArena(chunk_bytes=1 << 16)
    tables = [_weight(n, 64, gen, True) for n in (17, 40, 300)]  # the last needs its own chunk
    packed = [GroupedGemvWeight.pack_int4(*t, arena=arena) for t in tables]
    first, second = packed[0].packed, packed[1].packed
    assert second.data_ptr() == first.data_ptr() + -(-first.numel() // 64) * 64
    x = torch.randn(3, 64, generator=gen)
    for t, w in zip(tables, packed):
        alone = GroupedGemvWeight.pack_int4(*t)
        assert torch.equal(grouped_gemv_linear(x, w), grouped_gemv_linear(x, alone))


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=30), st.integers(64, 8192))
def test_arena_buffers_are_aligned_disjoint_and_sized(sizes, chunk):
    arena = PackArena(chunk_bytes=chunk)
    views = [arena.take(s) for s in sizes]
    spans = sorted((v.data_ptr(), v.data_ptr() + v.numel()) for v in views)
    assert [v.numel() for v in views] == sizes
    assert all(v.data_ptr() % PackArena.ALIGN == 0 for v in views)
    assert all(a_end <= b_start for (_, a_end), (b_start, _) in zip(spans, spans[1:]))


def test_bad_input_is_refused_with_the_reason():
    gen = torch.Generator().manual_seed(1)
    codes, scales, mins = _weight(16, 64, gen, False)
    with pytest.raises(ValueError, match="multiple of 32"):
        GroupedGemvWeight.pack_int4(codes[:, :48], scales[:, :1], mins[:, :1])
    with pytest.raises(ValueError, match=r"codes must lie in \[0, 15\]"):
        GroupedGemvWeight.pack_int4(codes + 16, scales, mins)
    with pytest.raises(ValueError, match=r"scales: expected shape \(16, 2\)"):
        GroupedGemvWeight.pack_int4(codes, scales[:, :1], mins)
    with pytest.raises(TypeError, match="mins: expected dtype"):
        GroupedGemvWeight.pack_int4(codes, scales, mins.double())
    with pytest.raises(TypeError, match="codes: expected dtype"):
        GroupedGemvWeight.pack_int8(codes, scales)  # uint8 codes are int4's
    with pytest.raises(ValueError, match="groups of 32 only"):
        GroupedGemvWeight.from_int4(codes, scales, mins, 64)
    weight = GroupedGemvWeight.pack_int4(codes, scales, mins)
    with pytest.raises(ValueError, match="x: expected size 64 at dim 1"):
        grouped_gemv_linear(torch.randn(2, 63), weight)
    with pytest.raises(ValueError, match="chunk_bytes must be >= 64"):
        PackArena(chunk_bytes=8)

