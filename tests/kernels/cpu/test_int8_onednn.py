"""int8 per channel through oneDNN's u8 x s8 GEMM: the activations' three byte planes hold the
24-bit fixed point exactly, and the linear equals its float64 torch reference to float32
rounding, odd sizes and both input dtypes included."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.int8_onednn import (
    OnednnInt8Weight,
    activation_bytes,
    int8_onednn_linear,
    int8_onednn_reference,
    onednn_int8_available,
)
from radixlm.kernels.cpu.quant_linear import Int8Weight, quantize_int8

pytestmark = pytest.mark.skipif(not onednn_int8_available(),
                                reason="this torch build lacks oneDNN's quantized linear ops")

SHAPES = [(1, 64, 48), (3, 96, 37), (37, 128, 130), (130, 256, 17), (2, 1536, 35)]  # rows, K, N
TOP = 127 * 2**16  # |v| of the largest activation


def _data(rows: int, k: int, n: int) -> tuple[torch.Tensor, Int8Weight]:
    gen = torch.Generator().manual_seed(rows * 1000 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    return x, quantize_int8(torch.randn(n, k, generator=gen) * 0.1)


@pytest.mark.parametrize(("rows", "k", "n"), SHAPES)
def test_byte_planes_hold_the_rounded_fixed_point(rows, k, n):
    x, _ = _data(rows, k, n)
    planes, x_scale = activation_bytes(x)
    assert planes.dtype == torch.uint8 and planes.shape == (3 * rows, k)
    b = planes.view(3, rows, k).to(torch.int64) - 128
    v = b[2] * 2**16 + b[1] * 2**8 + b[0]
    top = x.abs().max().item()
    assert x_scale == pytest.approx(top / 127, rel=1e-12)
    assert int(v.abs().max()) <= TOP + 1
    # within one unit of the fixed point (float32 rounds near 2^24), so within a unit of x
    assert int((v - torch.round(x.double() * (TOP / top)).long()).abs().max()) <= 1


@pytest.mark.parametrize(("rows", "k", "n"), SHAPES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_linear_matches_the_reference(rows, k, n, dtype):
    x, weight = _data(rows, k, n)
    x = x.to(dtype)
    y = int8_onednn_linear(x, OnednnInt8Weight.pack(weight))
    assert y.shape == (rows, n) and y.dtype == dtype
    ref = int8_onednn_reference(x, weight).double()
    # one fixed-point unit per element at most, then float32 (or the output dtype) rounding
    unit = x.double().abs().max() / TOP
    w_abs = (weight.codes.double().abs() * weight.scales.double()[:, None]).sum(1)
    eps = 2**-22 if dtype == torch.float32 else 2**-7
    bound = unit * w_abs[None, :] + eps * ref.abs().max()
    assert bool(((y.double() - ref).abs() <= bound).all())


def test_float32_products_stay_float32_faithful():
    """Against the exact product of the dequantized weight: float32's precision, three orders
    of magnitude inside what bfloat16 halves with bfloat16 outputs keep (~2e-3 here)."""
    x, weight = _data(5, 576, 200)
    y = int8_onednn_linear(x, OnednnInt8Weight.pack(weight)).double()
    exact = x.double() @ weight.dequantize(torch.float64).T
    assert (y - exact).abs().max().item() <= 2e-6 * exact.abs().max().item()


def test_extreme_codes_and_activations_are_exact():
    """Codes +-127 against activations at +-max|x| (the fixed point's ends): products exact."""
    k = 256
    codes = torch.full((4, k), 127, dtype=torch.int8)
    codes[1] = -127
    codes[2, ::2] = -127
    codes[3] = 0
    weight = Int8Weight(codes, torch.ones(4))
    x = torch.full((2, k), 3.0)
    x[1, ::3] = -3.0
    y = int8_onednn_linear(x, OnednnInt8Weight.pack(weight))
    torch.testing.assert_close(y, x @ codes.float().T, rtol=2**-22, atol=0)


def test_zero_and_non_finite_inputs():
    weight = OnednnInt8Weight.pack(quantize_int8(torch.randn(8, 32)))
    assert torch.equal(int8_onednn_linear(torch.zeros(2, 32), weight), torch.zeros(2, 8))
    bad = torch.zeros(2, 32)
    bad[0, 3] = float("nan")
    assert bool(int8_onednn_linear(bad, weight).isnan().all())


def test_bad_input_is_refused_with_the_reason():
    weight = OnednnInt8Weight.pack(quantize_int8(torch.randn(8, 32)))
    with pytest.raises(ValueError, match="x: expected size 32"):
        int8_onednn_linear(torch.randn(2, 16), weight)
    with pytest.raises(TypeError, match="x: expected dtype"):
        int8_onednn_linear(torch.ones(2, 32, dtype=torch.int32), weight)
    with pytest.raises(TypeError, match="expected an Int8Weight"):
        OnednnInt8Weight.pack(torch.zeros(8, 32, dtype=torch.int8))  # type: ignore[arg-type]
