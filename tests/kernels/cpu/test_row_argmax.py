"""The native greedy pick (kernels/cpu/row_argmax.py) equals torch's ``max(dim=-1).indices``:
random odd sizes, ties (the first maximum wins), -inf rows and NaNs, both native loops."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from radixlm.kernels.cpu import row_argmax
from radixlm.kernels.cpu.row_argmax import argmax_rows, argmax_rows_ref

needs_native = pytest.mark.skipif(
    row_argmax._NATIVE is None,
    reason="radixlm.kernels.cpu.native.row_argmax is not built: python setup.py build_ext "
           "--inplace")


@needs_native
@pytest.mark.parametrize("portable", [False, True])
@given(rows=st.integers(1, 5), n=st.integers(1, 300), levels=st.sampled_from([3, 50, 0]),
       seed=st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_first_maximum_as_torch(portable: bool, rows: int, n: int, levels: int,
                                seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, n, generator=gen)
    if levels:  # few distinct values: many ties, the first must win
        x = torch.randint(0, levels, (rows, n), generator=gen).float()
    assert torch.equal(argmax_rows(x, portable), argmax_rows_ref(x))


@needs_native
@pytest.mark.parametrize("portable", [False, True])
def test_specials_as_torch(portable: bool) -> None:
    n = 37
    x = torch.full((6, n), float("-inf"))
    x[1, 20] = 0.0
    x[2, 5] = float("nan")
    x[2, 30] = float("nan")
    x[2, 0] = 1e30
    x[3] = torch.arange(n, dtype=torch.float32).flip(0)  # the maximum at 0
    x[4, n - 1] = float("inf")
    x[4, 3] = float("inf")
    x[5, 0] = float("nan")
    got, want = argmax_rows(x, portable), argmax_rows_ref(x)
    assert torch.equal(got, want), (got, want)


@needs_native
def test_vocabulary_rows() -> None:
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(3, 262_144 + 7, generator=gen)
    x[1, 200_000] = x[1, 100_000] = 99.0
    assert torch.equal(argmax_rows(x), argmax_rows_ref(x))


def test_other_inputs_use_the_reference() -> None:
    x = torch.randn(2, 3, 9)
    assert torch.equal(argmax_rows(x), argmax_rows_ref(x))
    half = torch.randn(4, 11).to(torch.bfloat16)
    assert torch.equal(argmax_rows(half), argmax_rows_ref(half))
    cols = torch.randn(9, 4).t()  # not contiguous
    assert torch.equal(argmax_rows(cols), argmax_rows_ref(cols))
