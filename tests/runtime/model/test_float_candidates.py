"""The float candidates of a CPU linear: the native float32 GEMV is offered where it runs
(built, AVX-512, a contiguous float32 weight) and, chosen, computes the linear's product."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from radixlm.kernels.cpu_f32_gemv import f32_gemv_available
from radixlm.runtime.model.gemm_choice import GemmChooser
from radixlm.runtime.model.quantized_linear import float_impls


def test_the_gemv_is_offered_exactly_where_it_runs():
    w = torch.randn(12, 40)
    assert ("f32-avx512" in float_impls(w)) == f32_gemv_available()
    assert ("f32-avx512" in float_impls(w, allow_onednn=False)) == f32_gemv_available()
    assert "f32-avx512" not in float_impls(w.to(torch.bfloat16))
    assert "f32-avx512" not in float_impls(torch.randn(40, 12).T)  # strided: torch's only


@pytest.mark.skipif(not f32_gemv_available(), reason="the native float32 GEMV is not "
                    "built or this CPU lacks AVX-512 F")
def test_a_linear_fixed_on_the_gemv_computes_the_product_with_its_bias():
    gen = torch.Generator().manual_seed(8)
    w, bias = torch.randn(37, 70, generator=gen), torch.randn(37, generator=gen)
    lin = GemmChooser(fixed="f32-avx512").build("f32-gemv-test", float_impls(w), bias, 70, 37)
    assert lin.plan.used == {"f32-avx512"}
    for rows in (1, 8, 33):
        x = torch.randn(rows, 70, generator=gen)
        torch.testing.assert_close(lin(x), F.linear(x, w, bias), atol=1e-5, rtol=1e-5)
