"""The int8 weights' AMX GEMM equals its float64 reference bit for bit on odd sizes (N and K
below, at and past the 16 x 64 units; 1-300 rows) and on rows at the edges of the fixed-point
scale; it stays within x's rounding of the dequantized weight's exact product; a row holding
inf or nan gives nan; packing round-trips the codes and scales; another float dtype is
converted in and out; a wrong weight or a missing module is a clear error."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_testlib import EXTREME_ROWS, extreme_rows

from radixlm.kernels.cpu import int8_amx as cpu_int8_amx
from radixlm.kernels.cpu.int8_amx import (
    Int8AmxLinear,
    Int8AmxWeight,
    int8_amx_available,
    int8_amx_gemm,
    int8_amx_reference,
)
from radixlm.kernels.cpu.native import load, unavailable_reason
from radixlm.kernels.cpu.quant_linear import quantize_int8

needs_kernel = pytest.mark.skipif(not int8_amx_available(), reason=unavailable_reason(
    load("f32_amx_fx24_gemm"), "f32_amx_fx24_gemm", "AMX-INT8 and AVX-512 F/BW/DQ/VL"))

SHAPES = [(1, 1), (5, 7), (63, 15), (64, 16), (65, 17), (128, 48), (577, 70), (200, 144)]


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 15, 16, 17, 33, 129, 300])
@pytest.mark.parametrize(("k", "n"), SHAPES)
def test_gemm_equals_the_reference_and_the_dequantized_product(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 7919 + k * 31 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    q = quantize_int8(torch.randn(n, k, generator=gen))
    packed = Int8AmxWeight.pack(q)
    y = int8_amx_gemm(x, packed)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    assert torch.equal(y, int8_amx_reference(x, packed))
    w = q.dequantize().double()
    exact = x.double() @ w.T
    # x's rounding: half a step, at most 1/XMAX (~2^-23) of the row's largest |x|
    bound = (2.0**-22 * x.double().abs().amax(1, keepdim=True) * w.abs().sum(1)[None, :]
             + torch.finfo(torch.float32).eps * y.double().abs())
    assert bool(((y.double() - exact).abs() <= bound).all())


@needs_kernel
@pytest.mark.parametrize("case", EXTREME_ROWS)
def test_rows_at_the_edges_of_the_fixed_point_scale(case):
    gen = torch.Generator().manual_seed(13)
    x = extreme_rows(torch.randn(19, 150, generator=gen), case)
    packed = Int8AmxWeight.pack(quantize_int8(torch.randn(40, 150, generator=gen)))
    assert torch.equal(int8_amx_gemm(x, packed), int8_amx_reference(x, packed))


@needs_kernel
def test_a_row_with_inf_or_nan_gives_nan_and_the_linear_converts_other_dtypes():
    gen = torch.Generator().manual_seed(14)
    q = quantize_int8(torch.randn(20, 70, generator=gen))
    x = torch.randn(4, 70, generator=gen)
    clean = int8_amx_gemm(x, Int8AmxWeight.pack(q))
    x[2, 9] = float("nan")
    y = Int8AmxLinear(q)(x)
    assert bool(y[2].isnan().all()) and torch.equal(y[[0, 1, 3]], clean[[0, 1, 3]])
    bf = Int8AmxLinear(q)(x[[0, 1]].bfloat16())
    assert bf.dtype == torch.bfloat16
    expected = int8_amx_gemm(x[[0, 1]].bfloat16().float(), Int8AmxWeight.pack(q))
    assert torch.equal(bf, expected.bfloat16())


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 140), seed=st.integers(0, 2**16))
def test_packing_round_trips_the_codes_and_scales(n, k, seed):
    """Runs everywhere (packing is torch); zeros past N and K."""
    q = quantize_int8(torch.randn(n, k, generator=torch.Generator().manual_seed(seed)))
    packed = Int8AmxWeight.pack(q)
    back = packed.unpack()
    assert torch.equal(back.codes, q.codes) and torch.equal(back.scales, q.scales)
    tiles, blocks = -(-n // 16), -(-k // 64)
    units = packed.packed[: tiles * blocks * 1024]
    assert torch.count_nonzero(units) == torch.count_nonzero(q.codes)


def test_a_wrong_weight_or_a_missing_module_is_a_clear_error(monkeypatch):
    """Runs everywhere."""
    with pytest.raises(TypeError, match="weight: expected an Int8Weight"):
        Int8AmxWeight.pack(torch.zeros(4, 8))
    with pytest.raises(ValueError, match="packed: expected 1088 bytes"):
        Int8AmxWeight(torch.zeros(10, dtype=torch.uint8), out_features=4, in_features=8)
    monkeypatch.setattr(cpu_int8_amx, "_NATIVE", None)
    assert not int8_amx_available()
    with pytest.raises(RuntimeError, match="not built: run `python setup.py build_ext"):
        Int8AmxLinear(quantize_int8(torch.randn(4, 8)))
