"""The native float32 panel GEMM equals its float64 torch reference to float32 rounding on
odd sizes (N below, at and past multiples of the 48-column panel: the padded last panel's
masked stores; K from 1), 1-65 rows (register blocks of 8 and every tail of 1-7); packing
round-trips any weight and states its shape; a missing module or CPU is a clear error. What
it shares with the AMX GEMM (exact sums, row independence, the prepared linear, bad
arguments) is tested in test_f32_linear.py."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.kernels.cpu import f32_panel_gemm as cpu_f32_panel_gemm
from radixlm.kernels.cpu.f32_panel_gemm import (
    PANEL,
    F32PanelLinear,
    F32PanelWeight,
    f32_panel_gemm,
    f32_panel_gemm_available,
    f32_panel_gemm_reference,
)
from radixlm.kernels.cpu.native import load, unavailable_reason

needs_kernel = pytest.mark.skipif(not f32_panel_gemm_available(), reason=unavailable_reason(
    load("f32_panel_gemm"), "f32_panel_gemm", "AVX-512 F"))

# (K, N): N within one panel (1, 5, 16, 17, 33), at 48, past it (49, 95, 97: a padded last
# panel with 1-3 vectors' worth of valid columns), several panels (144, 150); K from 1
SHAPES = [(1, 1), (5, 5), (7, 16), (16, 17), (33, 33), (64, 48), (65, 49), (130, 95),
          (577, 97), (200, 144), (3, 150)]


def _within_float32(y: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> bool:
    """|y - exact| within the worst case of one float32 FMA chain over K terms: each step
    off by at most 2^-24 of the running sum of magnitudes (the FMA rounds once)."""
    exact = x.double() @ w.double().T
    magnitude = x.double().abs() @ w.double().abs().T
    return bool(((y.double() - exact).abs() <= (x.shape[1] + 1) * 2.0**-24 * magnitude).all())


@needs_kernel
@pytest.mark.parametrize("rows", [1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 32, 37, 65])
@pytest.mark.parametrize(("k", "n"), SHAPES)
def test_gemm_matches_the_reference(rows, k, n):
    gen = torch.Generator().manual_seed(rows * 10007 + k * 101 + n)
    x = torch.randn(rows, k, generator=gen) * torch.rand(rows, 1, generator=gen) * 4
    w = torch.randn(n, k, generator=gen) * torch.rand(n, 1, generator=gen)
    packed = F32PanelWeight.pack(w)
    y = f32_panel_gemm(x, packed)
    assert y.shape == (rows, n) and y.dtype == torch.float32
    assert _within_float32(y, x, w)
    assert _within_float32(f32_panel_gemm_reference(x, packed), x, w)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 150), k=st.integers(1, 40), seed=st.integers(0, 2**16))
def test_packing_round_trips_and_pads_with_zeros(n, k, seed):
    """Runs everywhere (packing is torch): panel p, line k is weight[48p : 48p + 48, k]."""
    w = torch.randn(n, k, generator=torch.Generator().manual_seed(seed))
    packed = F32PanelWeight.pack(w)
    panels = -(-n // PANEL)
    assert packed.panels.shape == (panels, k, PANEL)
    assert torch.equal(packed.unpack(), w)
    assert not packed.panels[-1, :, n - (panels - 1) * PANEL:].any()  # the padding
    assert torch.equal(packed.panels[(n - 1) // PANEL, :, (n - 1) % PANEL], w[n - 1])


def test_a_packed_weight_of_the_wrong_shape_is_refused():
    """Runs everywhere: the packed weight states its invariant on construction."""
    with pytest.raises(ValueError, match=r"panels: expected shape \(1, 8, 48\)"):
        F32PanelWeight(torch.zeros(2, 8, PANEL), out_features=4, in_features=8)
    with pytest.raises(ValueError, match="panels: expected a contiguous tensor"):
        F32PanelWeight(torch.zeros(1, PANEL, 8).transpose(1, 2), out_features=4, in_features=8)
    with pytest.raises(TypeError, match="weight: expected dtype"):
        F32PanelWeight.pack(torch.zeros(4, 8, dtype=torch.float64))


def test_missing_module_is_a_clear_error(monkeypatch):
    """Runs everywhere: without the built module the launcher names the remedy."""
    monkeypatch.setattr(cpu_f32_panel_gemm, "_NATIVE", None)
    assert not f32_panel_gemm_available()
    with pytest.raises(RuntimeError, match="not built: run `python setup.py build_ext"):
        F32PanelLinear(torch.zeros(4, 8))
    with pytest.raises(RuntimeError, match="not built"):
        f32_panel_gemm(torch.zeros(1, 8), F32PanelWeight.pack(torch.zeros(4, 8)))


def test_a_cpu_without_the_instructions_is_a_clear_error(monkeypatch):
    """Runs everywhere: a built module on a CPU without AVX-512 names what is missing."""
    class NoAvx512:
        @staticmethod
        def supported() -> bool:
            return False
    monkeypatch.setattr(cpu_f32_panel_gemm, "_NATIVE", NoAvx512)
    assert not f32_panel_gemm_available()
    with pytest.raises(RuntimeError, match="needs a CPU with AVX-512 F; this one lacks it"):
        F32PanelLinear(torch.zeros(4, 8))


@needs_kernel
def test_the_native_module_states_its_panel_width():
    assert load("f32_panel_gemm").panel_width() == PANEL
