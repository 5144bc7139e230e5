"""The native AVX-512 float32 GEMV equals its float64 torch reference to float32 rounding on
odd sizes (K tails of every width, N not a multiple of the 4- or 8-row tiles), 1-37 rows
(passes of up to 6 rows over each weight tile), exactly representable sums; bad arguments
raise a clear error before the kernel runs."""

from __future__ import annotations

import pytest
import torch
from kernel_testlib import assert_float32_linear_refuses_bad_x

from radixlm.kernels.cpu import f32_gemv as cpu_f32_gemv
from radixlm.kernels.cpu.f32_gemv import (
    F32GemvLinear,
    f32_gemv,
    f32_gemv_available,
    f32_gemv_reference,
)
from radixlm.kernels.cpu.native import load, unavailable_reason

needs_kernel = pytest.mark.skipif(not f32_gemv_available(), reason=unavailable_reason(
    load("f32_gemv"), "f32_gemv", "AVX-512 F"))

# (K, N): K below, at and past multiples of 16 (the masked tail and the 16-wide loop), N
# below, at and past multiples of the 4-row tile and of the 8-row one (1-2 rows), 12 and 13:
# 8-row tiles, then a 4-row one (then a single row)
SHAPES = [(1, 1), (5, 3), (16, 4), (17, 9), (63, 130), (64, 7), (65, 5), (577, 33), (1000, 66),
          (48, 12), (100, 13)]


def _within_float32(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> bool:
    """|y - exact| within the worst case of float32 sums in 16 lanes: K / 16 + 1 additions
    in each lane and the 4-step lane reduction, each off by at most 2^-24 of the sum of
    magnitudes (the FMA rounds once: the product itself is exact in it)."""
    k = x.shape[1]
    exact = (x.double() @ w.double().T)
    magnitude = x.double().abs() @ w.double().abs().T
    bound = (k / 16 + 8) * 2.0**-24 * magnitude
    return bool(((y.double() - exact).abs() <= bound).all())


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 17, 32, 37])
@pytest.mark.parametrize(("k", "n"), SHAPES)
def test_gemv_matches_the_reference(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 10007 + k * 101 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    w = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen)
    y = f32_gemv(x, w)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    assert _within_float32(y, x, w)
    ref = f32_gemv_reference(x, w)
    assert ref.dtype == torch.float32 and _within_float32(ref, x, w)


@needs_kernel
@pytest.mark.parametrize("rows", [1, 6, 7])
@pytest.mark.parametrize("scale", [2.0**-100, 1.0, 2.0**100])
def test_exactly_representable_sums_are_exact(rows, scale):
    """Small integers times 2^e: every partial sum is an integer below 2^24 times 2^e, so
    float32 holds the result exactly, whatever the summation order."""
    gen = torch.Generator().manual_seed(5)
    k, n = 203, 6
    x = torch.randint(-64, 65, (rows, k), generator=gen).float() * scale
    w = torch.randint(-64, 65, (n, k), generator=gen).float()
    assert torch.equal(f32_gemv(x, w), (x.double() @ w.double().T).float())


@needs_kernel
@pytest.mark.parametrize("prefetch", [0, 64, 100, 1 << 20])
def test_prefetch_distance_does_not_change_the_result(prefetch):
    gen = torch.Generator().manual_seed(3)
    x, w = torch.randn(3, 600, generator=gen), torch.randn(41, 600, generator=gen)
    assert torch.equal(f32_gemv(x, w, prefetch), f32_gemv(x, w, 0))


@needs_kernel
def test_a_row_does_not_depend_on_the_other_rows():
    """Each output is one tile's sum over K in a fixed order, whatever the row count."""
    gen = torch.Generator().manual_seed(6)
    x, w = torch.randn(13, 577, generator=gen), torch.randn(35, 577, generator=gen)
    full = f32_gemv(x, w)
    for rows in (1, 5, 6, 7):
        assert torch.equal(f32_gemv(x[:rows].contiguous(), w), full[:rows])


@needs_kernel
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_linear_on_a_float32_weight(strided):
    """The prepared linear: a contiguous x (the unchecked fast path) gives f32_gemv's result,
    a strided one is copied first."""
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(70, 131, generator=gen)
    x = torch.randn(131, 5, generator=gen).T if strided else torch.randn(5, 131, generator=gen)
    y = F32GemvLinear(w)(x)
    assert y.shape == (5, 70) and y.dtype == torch.float32
    assert torch.equal(y, f32_gemv(x.contiguous(), w))


@needs_kernel
def test_prepared_linear_refuses_bad_weights_and_inputs():
    with pytest.raises(ValueError, match="weight: expected a contiguous tensor"):
        F32GemvLinear(torch.zeros(8, 4).T)
    with pytest.raises(TypeError, match="weight: expected dtype"):
        F32GemvLinear(torch.zeros(4, 8, dtype=torch.bfloat16))
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        F32GemvLinear(torch.zeros(4, 8), prefetch=-1)
    assert_float32_linear_refuses_bad_x(F32GemvLinear(torch.zeros(4, 8)))
    assert torch.equal(F32GemvLinear(torch.zeros(4, 0))(torch.zeros(3, 0)), torch.zeros(3, 4))


@needs_kernel
def test_empty_sizes_give_an_empty_or_zero_result():
    assert f32_gemv(torch.zeros(0, 8), torch.zeros(4, 8)).shape == (0, 4)
    assert f32_gemv(torch.zeros(2, 8), torch.zeros(0, 8)).shape == (2, 0)
    assert torch.equal(f32_gemv(torch.zeros(2, 0), torch.zeros(3, 0)), torch.zeros(2, 3))


@needs_kernel
@pytest.mark.parametrize(("x", "w", "error", "match"), [
    (torch.zeros(2, 8, dtype=torch.float64), None, TypeError, "x: expected dtype"),
    (torch.zeros(2, 16), None, ValueError, "x: expected size 8 at dim 1"),
    (torch.zeros(2, 2, 8), None, ValueError, "x: expected 2 dimensions"),
    (torch.zeros(8, 2).T, None, ValueError, "x: expected a contiguous tensor"),
    (None, torch.zeros(4, 8, dtype=torch.float16), TypeError, "weight: expected dtype"),
    (None, torch.zeros(8, 4).T, ValueError, "weight: expected a contiguous tensor"),
    (None, torch.zeros(8), ValueError, "weight: expected 2 dimensions"),
], ids=["x-dtype", "x-width", "x-ndim", "x-strided", "w-dtype", "w-strided", "w-ndim"])
def test_bad_arguments_are_refused_with_the_reason(x, w, error, match):
    x = torch.zeros(2, 8) if x is None else x
    w = torch.zeros(4, 8) if w is None else w
    with pytest.raises(error, match=match):
        f32_gemv(x, w)


@needs_kernel
def test_the_native_entry_point_checks_its_own_arguments():
    native = load("f32_gemv")
    x, w, out = torch.zeros(1, 8), torch.zeros(4, 8), torch.empty(1, 4)
    ptrs = (x.data_ptr(), w.data_ptr(), out.data_ptr())
    with pytest.raises(ValueError, match="M, N and K must be >= 1"):
        native.gemv(*ptrs, 1, 4, 0, 0)
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        native.gemv(*ptrs, 1, 4, 8, -64)
    with pytest.raises(ValueError, match="data pointer is null"):
        native.gemv(ptrs[0], 0, ptrs[2], 1, 4, 8, 0)


def test_missing_module_is_a_clear_error(monkeypatch):
    """Runs everywhere: without the built module the launcher names the remedy."""
    monkeypatch.setattr(cpu_f32_gemv, "_NATIVE", None)
    assert not f32_gemv_available()
    with pytest.raises(RuntimeError, match="not built: run `python setup.py build_ext"):
        F32GemvLinear(torch.zeros(4, 8))
    with pytest.raises(RuntimeError, match="not built"):
        f32_gemv(torch.zeros(1, 8), torch.zeros(4, 8))


def test_a_cpu_without_the_instructions_is_a_clear_error(monkeypatch):
    """Runs everywhere: a built module on a CPU without AVX-512 names what is missing."""
    class NoAvx512:
        @staticmethod
        def supported() -> bool:
            return False
    monkeypatch.setattr(cpu_f32_gemv, "_NATIVE", NoAvx512)
    assert not f32_gemv_available()
    with pytest.raises(RuntimeError, match="needs a CPU with AVX-512 F; this one lacks it"):
        F32GemvLinear(torch.zeros(4, 8))
