"""The native AMX float32 GEMM is float32-accurate against float64 on odd sizes (N and K below,
at and past the 16 x 32 tile units: the zero padding and the partial tiles' stores; 1-300
rows: single row tiles, pairs, an odd tile left over, several blocks of 8 tiles), at float32's
scale of error on a model's shapes; packing round-trips any weight and states its shape; a
missing module or CPU is a clear error. What it shares with the panel GEMM (exact sums, row
independence, the prepared linear, bad arguments) is tested in test_f32_linear.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.kernels.cpu import f32_amx_gemm as cpu_f32_amx_gemm
from radixlm.kernels.cpu.f32_amx_gemm import (
    TILE_K,
    TILE_N,
    F32AmxLinear,
    F32AmxWeight,
    f32_amx_gemm,
    f32_amx_gemm_available,
    f32_amx_gemm_reference,
)
from radixlm.kernels.cpu.native import load, unavailable_reason

needs_kernel = pytest.mark.skipif(not f32_amx_gemm_available(), reason=unavailable_reason(
    load("f32_amx_gemm"), "f32_amx_gemm", "AMX-BF16 and AVX512-BF16"))

# (K, N): within one unit, at its edges and past them (K 31/32/33, N 15/16/17), several
SHAPES = [(1, 1), (5, 7), (31, 15), (32, 16), (33, 17), (64, 48), (97, 33), (577, 70),
          (200, 144)]


def _errors(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """|y - exact| over the sum of |x w| (the scale of a dot product's rounding)."""
    exact = x.double() @ w.double().T
    magnitude = (x.double().abs() @ w.double().abs().T).clamp_min(1e-300)
    return (y.double() - exact).abs() / magnitude


def _within_float32(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> bool:
    """The worst case the kernel allows: 2^-20 for the dropped products plus one rounding
    of 2^-24 per accumulation of 6 products per k (a float32 sum of 6K terms)."""
    k = x.shape[1]
    return bool((_errors(y, x, w) <= 2.0**-20 + (6 * k + 1) * 2.0**-24).all())


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 15, 16, 17, 32, 33, 48, 129, 160, 300])
@pytest.mark.parametrize(("k", "n"), SHAPES)
def test_gemm_matches_the_reference(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 10007 + k * 101 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    w = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen)
    packed = F32AmxWeight.pack(w)
    y = f32_amx_gemm(x, packed)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    assert _within_float32(y, x, w)
    assert _within_float32(f32_amx_gemm_reference(x, packed), x, w)


@needs_kernel
@pytest.mark.parametrize(("rows", "k", "n"), [(32, 576, 576), (512, 576, 960), (40, 1536, 100)])
def test_error_is_that_of_float32_not_of_bfloat16(rows, k, n):
    """On a model's shapes the error stays at float32's scale (MKL's own here: ~1e-7 of the
    sum of |x w|), far below what any product of single bfloat16 pieces would leave
    (2^-8 = 4e-3, or 2^-14 without the x0 w2 and x2 w0 terms)."""
    gen = torch.Generator().manual_seed(rows + k + n)
    x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen) * 0.02
    amx = _errors(f32_amx_gemm(x, F32AmxWeight.pack(w)), x, w).max().item()
    mkl = _errors(torch.nn.functional.linear(x, w), x, w).max().item()
    assert amx <= 2.0**-20
    assert amx <= 4 * mkl


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 70), seed=st.integers(0, 2**16))
def test_packing_round_trips_and_pads_with_zeros(n, k, seed):
    """Runs everywhere (packing is torch): units[t, b, r, c, e] = weight[16t + c, 32b + 2r + e]."""
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(seed))
    packed = F32AmxWeight.pack(w)
    tiles, blocks = -(-n // TILE_N), -(-k // TILE_K)
    assert packed.units.shape == (tiles, blocks, TILE_K // 2, TILE_N, 2)
    assert torch.equal(packed.unpack(), w)
    assert torch.count_nonzero(packed.units) == torch.count_nonzero(w)  # the rest is zeros
    t, c, b = (n - 1) // TILE_N, (n - 1) % TILE_N, (k - 1) // TILE_K
    assert packed.units[t, b, (k - 1) % TILE_K // 2, c, (k - 1) % 2] == w[n - 1, k - 1]


def test_a_packed_weight_of_the_wrong_shape_is_refused():
    """Runs everywhere: the packed weight states its invariant on construction."""
    with pytest.raises(ValueError, match=r"units: expected shape \(1, 1, 16, 16, 2\)"):
        F32AmxWeight(torch.zeros(2, 1, 16, 16, 2), out_features=4, in_features=8)
    with pytest.raises(TypeError, match="weight: expected dtype"):
        F32AmxWeight.pack(torch.zeros(4, 8, dtype=torch.float64))


def test_without_the_module_or_the_cpu_it_is_a_clear_error(monkeypatch):
    """Runs everywhere: no built module names the remedy; a CPU without AMX what it lacks."""
    monkeypatch.setattr(cpu_f32_amx_gemm, "_NATIVE", None)
    assert not f32_amx_gemm_available()
    with pytest.raises(RuntimeError, match="not built: run `python setup.py build_ext"):
        F32AmxLinear(torch.zeros(4, 8))

    class NoAmx:
        @staticmethod
        def supported() -> bool:
            return False
    monkeypatch.setattr(cpu_f32_amx_gemm, "_NATIVE", NoAmx)
    assert not f32_amx_gemm_available()
    with pytest.raises(RuntimeError, match="needs a CPU with AMX-BF16"):
        f32_amx_gemm(torch.zeros(1, 8), F32AmxWeight.pack(torch.zeros(4, 8)))


@needs_kernel
def test_the_native_module_states_its_tile_shape():
    assert load("f32_amx_gemm").tile_shape() == (TILE_N, TILE_K)
