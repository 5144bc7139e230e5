"""The CPU bitmask op (native AVX-512 and portable loops, and the numpy path where the module
is not built) against the torch reference: the very same logits (untouched or -inf), on the
layouts it takes and the ones it hands to the reference."""

from __future__ import annotations

import pytest
import torch
from test_token_bitmask import VOCAB, build

from radixlm.kernels import apply_token_bitmask_ref
from radixlm.kernels.cpu import token_bitmask
from radixlm.kernels.cpu.ops import NATIVE_OPS
from radixlm.kernels.cpu.token_bitmask import apply_token_bitmask_cpu

DTYPES = [torch.float32, torch.bfloat16]
PATHS = ["native", "portable", "numpy"]


@pytest.fixture(params=PATHS)
def apply(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):  # noqa: ANN201
    """The op on one path (the native ones skip where the module was not built)."""
    if request.param == "numpy":
        monkeypatch.setattr(token_bitmask, "_NATIVE", None)
    elif token_bitmask._NATIVE is None:
        pytest.skip("radixlm.kernels.cpu.native.token_bitmask is not built")
    portable = request.param == "portable"
    return lambda logits, bitmask, rows: apply_token_bitmask_cpu(logits, bitmask, rows,
                                                                 portable=portable)


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_rows", [False, True], ids=["all-rows", "some-rows"])
@pytest.mark.parametrize("vocab", VOCAB)
def test_cpu_op_matches_reference(vocab: int, with_rows: bool, dtype: torch.dtype,
                                  contiguous: bool, gen: torch.Generator, apply) -> None:  # noqa: ANN001
    logits, bitmask, rows = build(gen, vocab, torch.float32, with_rows, torch.device("cpu"))
    logits = logits.to(dtype)
    if contiguous:
        logits = logits.contiguous()
    logits[0, 1] = float("nan")  # a NaN logit stays NaN where allowed, -inf where not
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, rows)
    apply(logits, bitmask, rows)
    assert torch.equal(logits.isnan(), expected.isnan())
    assert torch.equal(logits.nan_to_num(0.5), expected.nan_to_num(0.5))
    if dtype == torch.float32:  # bit for bit, the NaN's payload included
        assert torch.equal(logits.view(torch.int32), expected.view(torch.int32))


@pytest.mark.parametrize("rows", [[0, 1, 2, 3, 4], [1, 2, 3], [3, 1, 4], [4], []],
                         ids=["all", "block", "scattered", "one", "none"])
def test_row_orders_match_reference(rows: list[int], gen: torch.Generator,
                                    apply) -> None:  # noqa: ANN001
    logits = torch.randn(5, 49152, generator=gen)
    bitmask = torch.randint(-(2**31), 2**31, (len(rows), 1536), generator=gen,
                            dtype=torch.int64).to(torch.int32)
    index = torch.tensor(rows, dtype=torch.int32)  # int32 rows: the op widens them
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, index)
    apply(logits, bitmask, index)
    assert torch.equal(logits.view(torch.int32), expected.view(torch.int32))


@pytest.mark.parametrize("rows", [[1, 1], [-1, 0]], ids=["repeated", "negative"])
def test_odd_rows_go_to_the_reference(rows: list[int], gen: torch.Generator,
                                      apply) -> None:  # noqa: ANN001
    logits = torch.randn(3, 100, generator=gen)
    bitmask = torch.randint(-(2**31), 2**31, (2, 4), generator=gen,
                            dtype=torch.int64).to(torch.int32)
    index = torch.tensor(rows)
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, index)
    apply(logits, bitmask, index)
    assert torch.equal(logits, expected)


def test_a_row_past_the_end_raises_as_the_reference(apply) -> None:  # noqa: ANN001
    with pytest.raises(IndexError):
        apply(torch.zeros(2, 40), torch.zeros(1, 2, dtype=torch.int32), torch.tensor([2]))


def test_the_native_set_applies_masks_with_it() -> None:
    assert NATIVE_OPS.apply_token_bitmask is apply_token_bitmask_cpu
