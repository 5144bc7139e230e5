"""What the native packed float32 GEMMs (panel, AMX bfloat16, AMX fixed point) share:
exactly representable sums come out exact and a row does not depend on the others (whatever
the row blocks or tiles); their prepared linears (one base): a contiguous ``x`` (the
unchecked fast path) gives the checked launcher's result, a strided one is copied first, a
weight already packed is used as it is; bad weights, inputs and raw pointer arguments are
refused with the reason before any kernel runs."""

from __future__ import annotations

from typing import NamedTuple

import pytest
import torch
from kernel_testlib import assert_float32_linear_refuses_bad_x

from radixlm.kernels.cpu.f32_amx_fx24_gemm import (
    F32AmxFx24Linear,
    F32AmxFx24Weight,
    f32_amx_fx24_available,
    f32_amx_fx24_gemm,
)
from radixlm.kernels.cpu.f32_amx_gemm import (
    F32AmxLinear,
    F32AmxWeight,
    f32_amx_gemm,
    f32_amx_gemm_available,
)
from radixlm.kernels.cpu.f32_panel_gemm import (
    F32PanelLinear,
    F32PanelWeight,
    f32_panel_gemm,
    f32_panel_gemm_available,
)
from radixlm.kernels.cpu.native import load


class Kernel(NamedTuple):
    linear: type
    weight: type
    gemm: object
    module: str
    available: bool
    needs: str
    data: str  # the packed weight's field holding the buffer the kernel reads


KERNELS = {
    "panel": Kernel(F32PanelLinear, F32PanelWeight, f32_panel_gemm, "f32_panel_gemm",
                    f32_panel_gemm_available(), "AVX-512 F", "panels"),
    "amx": Kernel(F32AmxLinear, F32AmxWeight, f32_amx_gemm, "f32_amx_gemm",
                  f32_amx_gemm_available(), "AMX-BF16 and AVX512-BF16", "units"),
    "amx-fx24": Kernel(F32AmxFx24Linear, F32AmxFx24Weight, f32_amx_fx24_gemm, "f32_amx_fx24_gemm",
                       f32_amx_fx24_available(), "AMX-INT8 and AVX-512 F/BW/DQ/VL", "packed"),
}


@pytest.fixture(params=sorted(KERNELS))
def kernel(request) -> Kernel:
    chosen = KERNELS[request.param]
    if not chosen.available:
        pytest.skip(f"{chosen.module}: not built, or this CPU lacks {chosen.needs}")
    return chosen


@pytest.mark.parametrize("rows", [1, 8, 13, 16, 37])
@pytest.mark.parametrize("scale", [2.0**-100, 1.0, 2.0**100])
def test_exactly_representable_sums_are_exact(kernel, rows, scale):
    """Small integers times 2^e: every partial sum is an integer below 2^24 times 2^e (and
    each such float32 is its own first bfloat16 piece, and exact in 24-bit fixed point), so
    float32 holds the result exactly, whatever the summation order."""
    gen = torch.Generator().manual_seed(5)
    k, n = 203, 61
    x = torch.randint(-64, 65, (rows, k), generator=gen).float() * scale
    w = torch.randint(-64, 65, (n, k), generator=gen).float()
    y = kernel.gemm(x, kernel.weight.pack(w))
    assert torch.equal(y, (x.double() @ w.double().T).float())


def test_a_row_does_not_depend_on_the_other_rows(kernel):
    """Each output is summed in one order whatever the row count, block, pair or tail."""
    gen = torch.Generator().manual_seed(6)
    x, w = torch.randn(150, 577, generator=gen), kernel.weight.pack(torch.randn(99, 577))
    full = kernel.gemm(x, w)
    for rows in (1, 7, 8, 9, 16, 17, 33, 129):
        assert torch.equal(kernel.gemm(x[:rows].contiguous(), w), full[:rows])
    assert torch.equal(kernel.gemm(x[11:].contiguous(), w), full[11:])


@pytest.mark.parametrize("strided", [False, True], ids=["contiguous", "strided"])
def test_linear_on_a_float32_weight(kernel, strided):
    gen = torch.Generator().manual_seed(4)
    w = torch.randn(70, 131, generator=gen)
    x = torch.randn(131, 5, generator=gen).T if strided else torch.randn(5, 131, generator=gen)
    y = kernel.linear(w)(x)
    assert y.shape == (5, 70) and y.dtype == torch.float32
    assert torch.equal(y, kernel.gemm(x.contiguous(), kernel.weight.pack(w)))
    assert torch.equal(kernel.linear(kernel.weight.pack(w))(x), y)


def test_prepared_linear_refuses_bad_weights_and_inputs(kernel):
    with pytest.raises(TypeError, match="weight: expected dtype"):
        kernel.linear(torch.zeros(4, 8, dtype=torch.bfloat16))
    assert_float32_linear_refuses_bad_x(kernel.linear(torch.zeros(4, 8)))
    assert torch.equal(kernel.linear(torch.zeros(4, 0))(torch.zeros(3, 0)), torch.zeros(3, 4))


@pytest.mark.parametrize(("x", "error", "match"), [
    (torch.zeros(2, 8, dtype=torch.float64), TypeError, "x: expected dtype"),
    (torch.zeros(2, 16), ValueError, "x: expected size 8 at dim 1"),
    (torch.zeros(2, 2, 8), ValueError, "x: expected 2 dimensions"),
    (torch.zeros(8, 2).T, ValueError, "x: expected a contiguous tensor"),
], ids=["x-dtype", "x-width", "x-ndim", "x-strided"])
def test_bad_arguments_are_refused_with_the_reason(kernel, x, error, match):
    with pytest.raises(error, match=match):
        kernel.gemm(x, kernel.weight.pack(torch.zeros(4, 8)))


def test_the_native_entry_point_checks_its_own_arguments(kernel):
    native = load(kernel.module)
    packed = kernel.weight.pack(torch.zeros(4, 8))
    data = getattr(packed, kernel.data)
    x, out = torch.zeros(1, 8), torch.empty(1, 4)
    with pytest.raises(ValueError, match="M, N and K must be >= 1"):
        native.gemm(x.data_ptr(), data.data_ptr(), out.data_ptr(), 1, 4, 0)
    with pytest.raises(ValueError, match="data pointer is null"):
        native.gemm(x.data_ptr(), 0, out.data_ptr(), 1, 4, 8)
