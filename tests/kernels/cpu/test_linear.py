"""oneDNN-packed linears equal F.linear and do not depend on the rest of the batch."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu.linear import PackedLinear, onednn_linear_available

pytestmark = pytest.mark.skipif(not onednn_linear_available(),
                                reason="this torch build has no oneDNN linear on CPU")


@pytest.mark.parametrize(("rows", "k", "n", "bias"), [(1, 64, 48, True), (37, 96, 130, False),
                                                      (300, 128, 64, True)])
def test_packed_linear_matches_f_linear(rows, k, n, bias):
    gen = torch.Generator().manual_seed(rows)
    lin = torch.nn.Linear(k, n, bias=bias)
    x = torch.randn(rows, k, generator=gen)
    packed = PackedLinear.from_linear(lin)
    torch.testing.assert_close(packed(x), lin(x).detach(), atol=1e-5, rtol=1e-5)
    alone = packed(x[:1].contiguous())
    assert torch.equal(alone, packed(x)[:1]), "a row's result must not depend on its batch"


def test_bad_input_is_refused_before_the_call():
    packed = PackedLinear.from_linear(torch.nn.Linear(16, 8))
    with pytest.raises(ValueError, match="x: expected size 16 at dim 1"):
        packed(torch.randn(2, 15))
    with pytest.raises(TypeError, match="x: expected dtype"):
        packed(torch.randn(2, 16, dtype=torch.float64))
