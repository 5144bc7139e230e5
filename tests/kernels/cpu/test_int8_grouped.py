"""int8 codes with a scale per group of 32 (GGUF's Q8_0) run as two int4 planes: the planes
dequantize exactly to ``codes * scale``, and the launcher equals the int4 kernel's reference
on both planes, summed."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.int8_grouped import Int8GroupedWeight, int8_grouped_linear
from radixlm.kernels.cpu.quant_linear import quant_kernels_available, quant_linear_reference

pytestmark = pytest.mark.skipif(not quant_kernels_available(),
                                reason="this torch build lacks the weight-only CPU kernels")

SHAPES = [(1, 64, 48), (3, 96, 37), (37, 128, 130)]  # (rows, K, N)


def _weight(k: int, n: int, seed: int) -> Int8GroupedWeight:
    gen = torch.Generator().manual_seed(seed)
    codes = torch.randint(-128, 128, (n, k), generator=gen, dtype=torch.int64)
    codes[0, :2] = torch.tensor([-128, 127])  # both ends of the range
    # float16-valued scales, as a Q8_0 block stores them
    scales = (torch.rand(n, k // 32, generator=gen) * 0.02 + 1e-3).half().float()
    return Int8GroupedWeight.build(codes.to(torch.int8), scales)


@pytest.mark.parametrize(("rows", "k", "n"), SHAPES)
def test_planes_dequantize_exactly(rows, k, n):
    weight = _weight(k, n, rows)
    planes = weight.planes.dequantize()
    expected = (weight.codes.float().view(n, k // 32, 32) * weight.scales[..., None]).view(n, k)
    assert torch.equal(planes[:n] + planes[n:], expected)
    assert torch.equal(weight.dequantize(), expected)


@pytest.mark.parametrize(("rows", "k", "n"), SHAPES)
def test_linear_is_the_int4_reference_on_both_planes(rows, k, n):
    weight = _weight(k, n, rows)
    x = torch.randn(rows, k, generator=torch.Generator().manual_seed(7))
    y = int8_grouped_linear(x, weight)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    ref = quant_linear_reference(x, weight.planes)
    scale = ref.abs().max().item()
    torch.testing.assert_close(y, ref[:, :n] + ref[:, n:], atol=scale * 2**-6, rtol=2**-7)
    exact = x @ weight.dequantize().T  # the bfloat16 roundings stay small
    assert (y - exact).abs().max().item() <= 2e-2 * exact.abs().max().item()


@pytest.mark.parametrize(("codes", "scales", "match"), [
    (torch.zeros(4, 64, dtype=torch.uint8), torch.ones(4, 2), "codes: expected dtype"),
    (torch.zeros(4, 64, dtype=torch.int8), torch.ones(4, 3), "scales: expected shape"),
    (torch.zeros(4, 64, dtype=torch.int8), torch.ones(4, 2, dtype=torch.float64),
     "scales: expected dtype"),
])
def test_bad_weights_are_refused(codes, scales, match):
    with pytest.raises((TypeError, ValueError), match=match):
        Int8GroupedWeight.build(codes, scales)


def test_wrong_input_width_is_refused():
    with pytest.raises(ValueError, match="x: expected size 64"):
        int8_grouped_linear(torch.randn(2, 32), _weight(64, 16, 0))
