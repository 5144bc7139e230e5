"""The float candidates of a CPU linear: the native float32 GEMV, panel GEMM and AMX GEMMs
(bfloat16 pieces, fixed point) are offered where they run (built, AVX-512 / AMX, a float32
weight; the GEMV reads it in place, so only a contiguous one; the fixed-point GEMM a finite
one) and, chosen, compute the linear's product."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from radixlm.kernels.cpu.f32_amx_fx24_gemm import f32_amx_fx24_available
from radixlm.kernels.cpu.f32_amx_gemm import f32_amx_gemm_available
from radixlm.kernels.cpu.f32_gemv import f32_gemv_available
from radixlm.kernels.cpu.f32_panel_gemm import f32_panel_gemm_available
from radixlm.runtime.model.gemm_choice import GemmChooser
from radixlm.runtime.model.quantized_linear import float_impls


def test_the_gemv_is_offered_exactly_where_it_runs():
    w = torch.randn(12, 40)
    assert ("f32-avx512" in float_impls(w)) == f32_gemv_available()
    assert ("f32-avx512" in float_impls(w, allow_onednn=False)) == f32_gemv_available()
    assert "f32-avx512" not in float_impls(w.to(torch.bfloat16))
    assert "f32-avx512" not in float_impls(torch.randn(40, 12).T)  # strided: torch's only


@pytest.mark.parametrize(("name", "available"), [
    ("f32-panel", f32_panel_gemm_available()), ("f32-amx", f32_amx_gemm_available()),
    ("f32-amx-fx24", f32_amx_fx24_available())])
def test_the_packed_gemms_are_offered_exactly_where_they_run(name, available):
    """They pack a copy, so a strided weight is offered them too."""
    w = torch.randn(12, 40)
    assert (name in float_impls(w)) == available
    assert (name in float_impls(torch.randn(40, 12).T)) == available
    assert name not in float_impls(w.to(torch.bfloat16))


NATIVE = {"f32-avx512": f32_gemv_available(), "f32-panel": f32_panel_gemm_available(),
          "f32-amx": f32_amx_gemm_available(), "f32-amx-fx24": f32_amx_fx24_available()}


@pytest.mark.parametrize("name", sorted(NATIVE))
def test_a_linear_fixed_on_a_native_kernel_computes_the_product_with_its_bias(name):
    if not NATIVE[name]:
        pytest.skip(f"{name}: the native kernel is not built or this CPU lacks its "
                    "instructions (AVX-512 F; AMX-BF16 for f32-amx, AMX-INT8 for f32-amx-fx24)")
    gen = torch.Generator().manual_seed(8)
    w, bias = torch.randn(53, 70, generator=gen), torch.randn(53, generator=gen)
    lin = GemmChooser(fixed=name).build(f"{name}-test", float_impls(w), bias, 70, 53)
    assert lin.plan.used == {name}
    for rows in (1, 8, 33):
        x = torch.randn(rows, 70, generator=gen)
        torch.testing.assert_close(lin(x), F.linear(x, w, bias), atol=1e-5, rtol=1e-5)


@pytest.mark.skipif(not f32_amx_fx24_available(), reason="f32_amx_fx24_gemm: not built, or this "
                    "CPU lacks AMX-INT8")
def test_the_fixed_point_gemm_is_not_offered_a_weight_it_cannot_hold():
    """inf or nan has no fixed-point digits: such a weight keeps the other candidates."""
    w = torch.randn(12, 40)
    w[3, 7] = float("nan")
    impls = float_impls(w)
    assert "f32-amx-fx24" not in impls and "torch" in impls
