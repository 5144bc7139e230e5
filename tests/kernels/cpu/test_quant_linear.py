"""Weight-only int8/int4 CPU linears equal their dequantized torch reference, odd sizes too."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.quant_linear import (
    Int4Weight,
    Int8Weight,
    int4_linear,
    int8_blocked_linear,
    int8_linear,
    quant_kernels_available,
    quant_linear_reference,
    quantize_int4,
    quantize_int8,
)

pytestmark = pytest.mark.skipif(not quant_kernels_available(),
                                reason="this torch build lacks the weight-only CPU kernels")

SHAPES = [(1, 64, 48), (3, 96, 37), (37, 128, 130), (130, 256, 17)]  # (rows, K, N)


def _data(rows: int, k: int, n: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(rows * 1000 + n)
    return torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen) * 0.1


def _assert_matches_reference(y: torch.Tensor, ref: torch.Tensor) -> None:
    # both round the output to bfloat16 (8 bits of mantissa): allow a few output ulps
    scale = ref.abs().max().item()
    torch.testing.assert_close(y, ref, atol=scale * 2**-7, rtol=2**-7)


@pytest.mark.parametrize(("rows", "k", "n"), SHAPES)
def test_int8_matches_reference(rows, k, n):
    x, w = _data(rows, k, n)
    weight = quantize_int8(w)
    y = int8_linear(x, weight)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    _assert_matches_reference(y, quant_linear_reference(x, weight))
    # per-channel int8 of a gaussian weight: dequantized within half a step of the original
    step = weight.scales[:, None]
    assert bool(((weight.dequantize() - w).abs() <= step / 2 + 1e-7).all())


@pytest.mark.parametrize(("rows", "k", "n"), SHAPES)
@pytest.mark.parametrize("block_rows", [16, 48, 1000])
def test_int8_blocked_is_the_float32_dequantized_product(rows, k, n, block_rows):
    x, w = _data(rows, k, n)
    weight = quantize_int8(w)
    y = int8_blocked_linear(x, weight, block_rows)
    ref = torch.nn.functional.linear(x, weight.codes.float()) * weight.scales
    torch.testing.assert_close(y, ref, rtol=1e-6, atol=1e-6 * ref.abs().max().item())


@pytest.mark.parametrize("rows", [1, 5])
def test_int8_keeps_float32_activations_and_scales(rows):
    """Values bfloat16 cannot hold survive: x = 1 + 2^-12 and scales 1 + j 2^-10 (an identity
    code matrix, so each output is one product and no sum rounds): y = x * scale to ~2^-16."""
    k = 64
    x = torch.full((rows, k), 1 + 2**-12) * torch.linspace(1, 2, rows)[:, None]
    scales = 1 + 2**-10 * torch.arange(k, dtype=torch.float32)
    weight = Int8Weight(torch.eye(k, dtype=torch.int8), scales)
    torch.testing.assert_close(int8_linear(x, weight), x * scales, rtol=2**-15, atol=0)


@pytest.mark.parametrize(("rows", "k", "n", "group"),
                         [(*shape, g) for shape in SHAPES for g in (32, 64, 128)
                          if shape[1] % g == 0])
def test_int4_matches_reference(rows, k, n, group):
    x, w = _data(rows, k, n)
    weight = quantize_int4(w, group)
    y = int4_linear(x, weight)
    assert y.shape == (rows, n)
    _assert_matches_reference(y, quant_linear_reference(x, weight))
    step = weight.scales.repeat_interleave(group, dim=1)
    assert bool(((weight.dequantize() - w).abs() <= step / 2 + 1e-6).all())


@pytest.mark.parametrize(("k", "n", "group"), [(64, 48, 32), (96, 37, 32), (256, 17, 128),
                                                (576, 131, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_int4_dequantize_is_bit_identical_to_the_out_of_place_formula(k, n, group, dtype):
    """The in-place dequantization rounds exactly as ``(q - 8) * s + z`` on temporaries."""
    gen = torch.Generator().manual_seed(k + n)
    weight = quantize_int4(torch.randn(n, k, generator=gen) * 0.1, group)
    codes = weight.codes.clone()
    q = (weight.codes.to(torch.float32) - 8.0).reshape(n, k // group, group)
    expected = (q * weight.scales[:, :, None] + weight.zeros[:, :, None]).reshape(n, k)
    assert torch.equal(weight.dequantize(dtype), expected.to(dtype))
    assert torch.equal(weight.codes, codes)  # the codes themselves are not touched in place


def test_int4_convention_is_code_minus_8_times_scale_plus_zero():
    """Torch's int4pack convention, pinned: a unit input column reads back (c - 8) * s + z."""
    k, n = 32, 16
    codes = torch.arange(n * k).remainder(16).reshape(n, k).to(torch.uint8)
    scales = torch.full((n, 1), 0.5)
    zeros = torch.full((n, 1), 0.25)
    weight = Int4Weight.build(codes, scales, zeros, 32)
    eye = torch.eye(k)
    got = int4_linear(eye, weight).T  # [N, K]
    torch.testing.assert_close(got, (codes.float() - 8) * 0.5 + 0.25)


def test_a_row_does_not_depend_on_its_batch():
    x, w = _data(9, 128, 40)
    for weight, fn in ((quantize_int8(w), int8_linear), (quantize_int4(w, 32), int4_linear)):
        assert torch.equal(fn(x[:1].contiguous(), weight), fn(x, weight)[:1])


def test_bad_input_is_refused_with_the_reason():
    w = torch.randn(16, 96)
    with pytest.raises(ValueError, match="multiple of the group size 64"):
        quantize_int4(w, 64)
    with pytest.raises(ValueError, match="group_size must be one of"):
        Int4Weight.build(torch.zeros(16, 96, dtype=torch.uint8), torch.ones(16, 3),
                         torch.zeros(16, 3), 48)
    with pytest.raises(ValueError, match=r"codes must lie in \[0, 15\]"):
        Int4Weight.build(torch.full((16, 32), 16, dtype=torch.uint8), torch.ones(16, 1),
                         torch.zeros(16, 1), 32)
    with pytest.raises(ValueError, match="x: expected size 96 at dim 1"):
        int8_linear(torch.randn(2, 95), quantize_int8(w))
    with pytest.raises(ValueError, match="block_rows must be >= 1"):
        int8_blocked_linear(torch.randn(2, 96), quantize_int8(w), 0)
