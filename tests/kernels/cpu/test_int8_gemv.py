"""The native AVX-512 int8 GEMV equals its float64 torch reference to float32 rounding on odd
sizes (K tails of every width), 1-8 rows and more (chunks of 8), extreme codes and activations;
bad arguments raise a clear error before the kernel runs."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu import int8_gemv as cpu_int8_gemv
from radixlm.kernels.cpu.int8_gemv import (
    Int8GemvLinear,
    int8_gemv,
    int8_gemv_available,
    int8_gemv_linear,
    int8_gemv_reference,
)
from radixlm.kernels.cpu.native import load
from radixlm.kernels.cpu.quant_linear import Int8Weight, quantize_int8


def _skip_reason() -> str:
    module = load("int8_gemv")
    if module is None:
        return ("radixlm.kernels.cpu.native.int8_gemv is not built "
                "(python setup.py build_ext --inplace)")
    return "this CPU lacks AVX-512 F/BW/VL, which the int8 GEMV needs"


needs_kernel = pytest.mark.skipif(not int8_gemv_available(), reason=_skip_reason())

# (K, N): K below, at and past multiples of 16 and 64 (the masked tail, the 16-wide loop and
# the 64-wide prefetching loop), N not a multiple of the 4- and 2-row tiles
SHAPES = [(1, 1), (5, 3), (16, 4), (17, 9), (63, 130), (64, 7), (65, 5), (577, 33), (1000, 66)]


def _codes(n: int, k: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randint(-128, 128, (n, k), dtype=torch.int8, generator=gen)


def _within_float32(y: torch.Tensor, x: torch.Tensor, codes: torch.Tensor,
                    scales: torch.Tensor) -> bool:
    """|y - exact| within the worst case of float32 sums in 16 lanes: K / 16 + 4 additions in
    each lane and the lane reduction, then the scale, each off by at most 2^-24 of the sum of
    magnitudes (products of a float32 and an int8 code are exact in the FMA)."""
    k = x.shape[1]
    exact = int8_gemv_reference(x, codes, scales).double()
    magnitude = x.double().abs() @ codes.double().abs().T * scales.double()
    bound = (k / 16 + 8) * 2.0**-24 * magnitude
    return bool(((y.double() - exact).abs() <= bound).all())


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 3, 4, 5, 6, 7, 8, 11, 17])
@pytest.mark.parametrize(("k", "n"), SHAPES)
def test_gemv_matches_the_reference(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 10007 + k * 101 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    codes, scales = _codes(n, k, gen), torch.rand(n, generator=gen) + 1e-3
    y = int8_gemv(x, codes, scales)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    assert _within_float32(y, x, codes, scales)


# (K, N) for 1-2 rows: 8-row tiles (both rows in one pass), then a 4-row one and/or single
# rows: 12 = 8 + 4, 13 = 8 + 4 + 1, 15 = 8 + 4 + 3, 23 = 16 + 4 + 3, 8 and 16 exactly
WIDE_SHAPES = [(64, 8), (577, 12), (17, 13), (65, 15), (200, 16), (1000, 23)]


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2])
@pytest.mark.parametrize(("k", "n"), WIDE_SHAPES)
def test_wide_tiles_then_narrow_ones_match_the_reference_and_single_rows(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 7919 + k * 31 + n)
    x = torch.randn(rows, k, generator=gen) * 3
    codes, scales = _codes(n, k, gen), torch.rand(n, generator=gen) + 1e-3
    y = int8_gemv(x, codes, scales)
    assert _within_float32(y, x, codes, scales)
    for r in range(rows):  # each row alone through the same tiles: the same numbers
        assert torch.equal(int8_gemv(x[r:r + 1].contiguous(), codes, scales), y[r:r + 1])
    for j in range(n):  # alone, a weight row takes the 1-row tile (one full reduction per
        # output): the 4-at-once lane sums of 4- and 8-row tiles add in the same order
        assert torch.equal(int8_gemv(x, codes[j:j + 1].contiguous(), scales[j:j + 1]),
                           y[:, j:j + 1])


@needs_kernel
@pytest.mark.parametrize("rows", [1, 4, 8])
@pytest.mark.parametrize("magnitude", [2.0**-100, 1.0, 2.0**100])
def test_extreme_codes_and_activations_are_exact(rows, magnitude):
    """Codes at -128 and 127 against activations +-2^e: every partial sum is an integer
    below 2^24 times 2^e, so float32 holds the result exactly, whatever the order."""
    k, n = 203, 6
    codes = torch.full((n, k), 127, dtype=torch.int8)
    codes[1] = -128
    codes[2, ::2] = -128
    codes[3] = 0
    codes[4, ::3] = -128
    x = torch.full((rows, k), magnitude)
    x[:, ::5] = -magnitude
    y = int8_gemv(x, codes, torch.ones(n))
    assert torch.equal(y, (x.double() @ codes.double().T).float())


@needs_kernel
@pytest.mark.parametrize("prefetch", [0, 64, 100, 1 << 20])
def test_prefetch_distance_does_not_change_the_result(prefetch):
    gen = torch.Generator().manual_seed(3)
    x, codes, scales = torch.randn(3, 600, generator=gen), _codes(40, 600, gen), torch.rand(40)
    assert torch.equal(int8_gemv(x, codes, scales, prefetch), int8_gemv(x, codes, scales, 0))


@needs_kernel
@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16], ids=str)
def test_linear_on_an_int8_weight(dtype, strided):
    """The prepared Int8Weight linear: x's dtype in and out (computed in float32), strided x
    copied; a float32 contiguous x (the unchecked fast path) gives int8_gemv's result."""
    gen = torch.Generator().manual_seed(4)
    weight = quantize_int8(torch.randn(70, 131, generator=gen))
    x = torch.randn(131, 5, generator=gen).T if strided else torch.randn(5, 131, generator=gen)
    x = x.to(dtype)
    linear = Int8GemvLinear(weight)
    y = linear(x)
    assert y.shape == (5, 70) and y.dtype == dtype
    expected = int8_gemv(x.float().contiguous(), weight.codes, weight.scales).to(dtype)
    assert torch.equal(y, expected) and torch.equal(int8_gemv_linear(x, weight), expected)
    exact = x.double() @ weight.dequantize(torch.float64).T
    tol = 2e-6 if dtype == torch.float32 else 1e-2
    assert (y.double() - exact).abs().max().item() <= tol * exact.abs().max().item()


@needs_kernel
def test_prepared_linear_refuses_bad_weights_and_inputs():
    codes = torch.zeros(8, 4, dtype=torch.int8).T  # a valid Int8Weight, but strided
    with pytest.raises(ValueError, match="weight.codes: expected a contiguous tensor"):
        Int8GemvLinear(Int8Weight(codes, torch.ones(4)))
    with pytest.raises(TypeError, match="expected an Int8Weight"):
        Int8GemvLinear(torch.zeros(4, 8, dtype=torch.int8))  # type: ignore[arg-type]
    weight = Int8Weight(torch.zeros(4, 8, dtype=torch.int8), torch.ones(4))
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        Int8GemvLinear(weight, prefetch=-1)
    linear = Int8GemvLinear(weight)
    with pytest.raises(ValueError, match="x: expected size 8 at dim 1"):
        linear(torch.zeros(2, 9))
    with pytest.raises(TypeError, match="x: expected dtype"):
        linear(torch.zeros(2, 8, dtype=torch.int32))
    with pytest.raises(ValueError, match="x: expected 2 dimensions"):
        linear(torch.zeros(8))
    assert linear(torch.zeros(0, 8)).shape == (0, 4)


@needs_kernel
def test_empty_rows_give_an_empty_result():
    codes = torch.zeros(4, 8, dtype=torch.int8)
    assert int8_gemv(torch.zeros(0, 8), codes, torch.ones(4)).shape == (0, 4)


@needs_kernel
@pytest.mark.parametrize(("x", "codes", "scales", "error", "match"), [
    (torch.zeros(2, 8, dtype=torch.float64), None, None, TypeError, "x: expected dtype"),
    (torch.zeros(2, 16), None, None, ValueError, "x: expected size 8 at dim 1"),
    (torch.zeros(2, 2, 8), None, None, ValueError, "x: expected 2 dimensions"),
    (torch.zeros(8, 2).T, None, None, ValueError, "x: expected a contiguous tensor"),
    (None, torch.zeros(4, 8, dtype=torch.uint8), None, TypeError, "codes: expected dtype"),
    (None, torch.zeros(8, 4, dtype=torch.int8).T, None, ValueError, "codes: expected a contig"),
    (None, None, torch.ones(5), ValueError, "scales: expected size 4 at dim 0"),
    (None, None, torch.ones(4, dtype=torch.float16), TypeError, "scales: expected dtype"),
    (None, None, [1.0] * 4, TypeError, "scales: expected a torch.Tensor"),
], ids=["x-dtype", "x-width", "x-ndim", "x-strided", "codes-dtype", "codes-strided",
        "scales-len", "scales-dtype", "scales-type"])
def test_bad_arguments_are_refused_with_the_reason(x, codes, scales, error, match):
    x = torch.zeros(2, 8) if x is None else x
    codes = torch.zeros(4, 8, dtype=torch.int8) if codes is None else codes
    scales = torch.ones(4) if scales is None else scales
    with pytest.raises(error, match=match):
        int8_gemv(x, codes, scales)


@needs_kernel
def test_the_native_entry_point_checks_its_own_arguments():
    native = load("int8_gemv")
    x, codes, scales, out = torch.zeros(1, 8), torch.zeros(4, 8, dtype=torch.int8), \
        torch.ones(4), torch.empty(1, 4)
    ptrs = (x.data_ptr(), codes.data_ptr(), scales.data_ptr(), out.data_ptr())
    with pytest.raises(ValueError, match="M, N and K must be >= 1"):
        native.gemv(*ptrs, 0, 4, 8, 0)
    with pytest.raises(ValueError, match="prefetch must be >= 0"):
        native.gemv(*ptrs, 1, 4, 8, -64)
    with pytest.raises(ValueError, match="data pointer is null"):
        native.gemv(0, *ptrs[1:], 1, 4, 8, 0)


def test_missing_module_is_a_clear_error(monkeypatch):
    """Runs everywhere: without the built module the launcher names the remedy."""
    monkeypatch.setattr(cpu_int8_gemv, "_NATIVE", None)
    assert not int8_gemv_available()
    weight = Int8Weight(torch.zeros(4, 8, dtype=torch.int8), torch.ones(4))
    with pytest.raises(RuntimeError, match="not built: run `python setup.py build_ext"):
        int8_gemv_linear(torch.zeros(1, 8), weight)
