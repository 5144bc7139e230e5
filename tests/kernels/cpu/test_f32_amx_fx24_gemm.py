"""The native fixed-point AMX GEMM equals its float64 reference bit for bit on odd sizes (N
and K below, at and past the 16 x 64 units; 1-300 rows: a short single tile, full tiles, a
partial one) and on rows at the edges of the fixed-point scale; it stays within its stated
bound of the exact product, at float32's scale of error on a model's shapes; a row holding
inf or nan gives nan and no other row changes; packing keeps the digits and the padding;
bad weights and a missing module or CPU are clear errors. What it shares with the other
packed GEMMs (exact sums, row independence, the prepared linear, bad arguments) is tested in
test_f32_linear.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from kernel_testlib import EXTREME_ROWS, extreme_rows

from radixlm.kernels.cpu import f32_amx_fx24_gemm as cpu_f32_amx_fx24_gemm
from radixlm.kernels.cpu.f32_amx_fx24_gemm import (
    MAX_K,
    TILE_K,
    TILE_N,
    XMAX,
    F32AmxFx24Linear,
    F32AmxFx24Weight,
    digit_planes,
    f32_amx_fx24_available,
    f32_amx_fx24_gemm,
    f32_amx_fx24_reference,
    fixed_rows,
)
from radixlm.kernels.cpu.int8_amx import Int8AmxWeight
from radixlm.kernels.cpu.native import load, unavailable_reason
from radixlm.kernels.cpu.quant_linear import quantize_int8

needs_kernel = pytest.mark.skipif(not f32_amx_fx24_available(), reason=unavailable_reason(
    load("f32_amx_fx24_gemm"), "f32_amx_fx24_gemm", "AMX-INT8 and AVX-512 F/BW/DQ/VL"))

# (K, N): within one unit, at its edges and past them (K 63/64/65, N 15/16/17), several
SHAPES = [(1, 1), (5, 7), (63, 15), (64, 16), (65, 17), (128, 48), (97, 33), (577, 70),
          (200, 144)]


def _bound(x: torch.Tensor, w: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The stated bound: 2^-20 K max|x[m]| max|w[n]| plus half an ulp of the result."""
    k = x.shape[1]
    xmax, wmax = x.double().abs().amax(1), w.double().abs().amax(1)
    ulp = torch.finfo(torch.float32).eps * y.double().abs()
    return 2.0**-20 * k * xmax[:, None] * wmax[None, :] + ulp


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 15, 16, 17, 32, 33, 48, 129, 300])
@pytest.mark.parametrize(("k", "n"), SHAPES)
def test_gemm_equals_the_reference_and_keeps_its_bound(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 10007 + k * 101 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    w = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen)
    packed = F32AmxFx24Weight.pack(w)
    y = f32_amx_fx24_gemm(x, packed)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    assert torch.equal(y, f32_amx_fx24_reference(x, packed))
    exact = x.double() @ w.double().T
    assert bool(((y.double() - exact).abs() <= _bound(x, w, y)).all())


@needs_kernel
@pytest.mark.parametrize("case", EXTREME_ROWS)
def test_rows_at_the_edges_of_the_fixed_point_scale(case):
    """One huge element (the others keep 2^-23 of it), rows near and below float32's
    smallest normals (the scale stops at 2^126) and huge rows: still the reference's bits."""
    gen = torch.Generator().manual_seed(11)
    x = extreme_rows(torch.randn(19, 150, generator=gen), case)
    packed = F32AmxFx24Weight.pack(torch.randn(40, 150, generator=gen))
    assert torch.equal(f32_amx_fx24_gemm(x, packed), f32_amx_fx24_reference(x, packed))


@needs_kernel
@pytest.mark.parametrize(("rows", "k", "n"), [(1, 576, 576), (32, 576, 1536), (40, 1536, 100)])
def test_error_is_at_float32_scale(rows, k, n):
    """On a model's shapes the error stays at float32's scale, within 2^-21 (4.8e-7) of the
    sum of |x w| (measured 1.6-3.3e-7; MKL's float32 0.3-1.3e-7: 2-10x less, because
    float32 keeps 24 bits of each element and fixed point 24 bits of the row's largest), 200
    times below the model oracle's 1e-4; on average below 1e-7."""
    gen = torch.Generator().manual_seed(rows + k + n)
    x, w = torch.randn(rows, k, generator=gen), torch.randn(n, k, generator=gen) * 0.02
    exact = x.double() @ w.double().T
    magnitude = x.double().abs() @ w.double().abs().T

    errors = (f32_amx_fx24_gemm(x, F32AmxFx24Weight.pack(w)).double() - exact).abs()
    assert (errors / magnitude).max().item() <= 2.0**-21
    assert (errors / magnitude).mean().item() <= 1e-7


@needs_kernel
def test_a_row_with_inf_or_nan_gives_nan_and_leaves_the_others():
    gen = torch.Generator().manual_seed(12)
    x, packed = torch.randn(5, 70, generator=gen), F32AmxFx24Weight.pack(torch.randn(20, 70))
    clean = f32_amx_fx24_gemm(x, packed)
    x[1, 5], x[3, 69] = float("inf"), float("nan")
    y = f32_amx_fx24_gemm(x, packed)
    assert bool(y[[1, 3]].isnan().all())
    assert torch.equal(y[[0, 2, 4]], clean[[0, 2, 4]])


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 40), k=st.integers(1, 140), seed=st.integers(0, 2**16),
       scale=st.sampled_from([2.0**-60, 1.0, 2.0**60]))
def test_packing_keeps_the_digits_and_pads_with_zeros(n, k, seed, scale):
    """Runs everywhere (packing is torch): the planes recombine to the rows' fixed-point
    integers, each digit in [-128, 127], within half a step (1 / XMAX, ~2^-23) of the row's
    largest |w|; zeros past N
    and K; the row factor after the units is 2^(16 - e)."""
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(seed)) * scale
    packed = F32AmxFx24Weight.pack(w)
    planes, factor = packed.planes()
    v, e = fixed_rows(w)
    assert planes.abs().max() <= 128 and planes.min() >= -128 and planes.max() <= 127
    assert torch.equal(planes[0] * 65536 + planes[1] * 256 + planes[2], v.to(torch.int64))
    assert torch.equal(factor, torch.pow(2.0, 16 - e.double()).float())
    assert bool((v.abs().amax(1) >= XMAX / 2).all() and (v.abs() <= XMAX).all())
    rowmax = w.double().abs().amax(1, keepdim=True)
    assert bool(((packed.unpack() - w.double()).abs() <= rowmax / XMAX).all())
    tiles, blocks = -(-n // TILE_N), -(-k // TILE_K)
    assert packed.packed.numel() == tiles * blocks * 3 * TILE_N * TILE_K + 4 * tiles * TILE_N
    units = packed.packed[: tiles * blocks * 3 * TILE_N * TILE_K]
    assert torch.count_nonzero(units) == torch.count_nonzero(digit_planes(v))


def test_bad_weights_are_refused_with_the_reason():
    """Runs everywhere: the packed weight states its invariant on construction."""
    with pytest.raises(ValueError, match="packed: expected 3136 bytes"):
        F32AmxFx24Weight(torch.zeros(10, dtype=torch.uint8), out_features=4, in_features=8)
    with pytest.raises(ValueError, match=f"0 <= K <= {MAX_K}"):
        F32AmxFx24Weight(torch.zeros(10, dtype=torch.uint8), out_features=4,
                         in_features=MAX_K + 1)
    with pytest.raises(TypeError, match="weight: expected dtype"):
        F32AmxFx24Weight.pack(torch.zeros(4, 8, dtype=torch.float64))
    w = torch.zeros(4, 8)
    w[2, 3] = float("inf")
    with pytest.raises(ValueError, match="weight: holds inf or nan"):
        F32AmxFx24Weight.pack(w)


def test_without_the_module_or_the_cpu_it_is_a_clear_error(monkeypatch):
    """Runs everywhere: no built module names the remedy; a CPU without AMX what it lacks."""
    monkeypatch.setattr(cpu_f32_amx_fx24_gemm, "_NATIVE", None)
    assert not f32_amx_fx24_available()
    with pytest.raises(RuntimeError, match="not built: run `python setup.py build_ext"):
        F32AmxFx24Linear(torch.zeros(4, 8))

    class NoAmx:
        @staticmethod
        def supported() -> bool:
            return False
    monkeypatch.setattr(cpu_f32_amx_fx24_gemm, "_NATIVE", NoAmx)
    assert not f32_amx_fx24_available()
    with pytest.raises(RuntimeError, match="needs a CPU with AMX-INT8"):
        f32_amx_fx24_gemm(torch.zeros(1, 8), F32AmxFx24Weight.pack(torch.zeros(4, 8)))


@needs_kernel
def test_the_native_module_states_its_unit_shape():
    assert load("f32_amx_fx24_gemm").unit_shape() == (TILE_N, TILE_K, MAX_K)


@needs_kernel
@pytest.mark.parametrize("threads", [2, 3, 64])
def test_threads_split_the_column_tiles_and_change_no_bit(threads):
    """From 8 rows up a call splits its column tiles over ``threads`` (7 tiles here: uneven
    shares, and more threads than tiles); every output is computed as alone. Fewer rows stay
    on the caller's thread. A linear keeps the torch thread count it was built under."""
    native = load("f32_amx_fx24_gemm")
    gen = torch.Generator().manual_seed(threads)
    w = torch.randn(100, 577, generator=gen)
    fx24, codes = F32AmxFx24Weight.pack(w), Int8AmxWeight.pack(quantize_int8(w))
    for x in (torch.randn(rows, 577, generator=gen) for rows in (3, 8, 40)):
        for gemm, packed in ((native.gemm, fx24), (native.gemm_codes, codes)):
            alone = torch.empty(x.shape[0], 100)
            split = torch.empty(x.shape[0], 100)
            gemm(x.data_ptr(), packed.packed.data_ptr(), alone.data_ptr(), x.shape[0], 100, 577)
            gemm(x.data_ptr(), packed.packed.data_ptr(), split.data_ptr(), x.shape[0], 100, 577,
                 threads=threads)
            assert torch.equal(split, alone)
    with pytest.raises(ValueError, match="threads must be >= 1"):
        native.gemm(x.data_ptr(), fx24.packed.data_ptr(), alone.data_ptr(), 1, 100, 577,
                    threads=0)
    previous = torch.get_num_threads()
    try:
        torch.set_num_threads(threads)
        linear = F32AmxFx24Linear(fx24)
    finally:
        torch.set_num_threads(previous)
    assert torch.equal(linear(x), f32_amx_fx24_gemm(x, fx24))
