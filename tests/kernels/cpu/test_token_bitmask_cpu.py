"""The numpy bitmask op against the torch reference: the very same logits (untouched or
-inf), on the layouts it takes and the ones it hands to the reference."""

from __future__ import annotations

import pytest
import torch
from test_token_bitmask import VOCAB, build

from radixlm.kernels import apply_token_bitmask_ref
from radixlm.kernels.cpu.ops import NATIVE_OPS
from radixlm.kernels.cpu.token_bitmask import apply_token_bitmask_cpu

DTYPES = [torch.float32, torch.bfloat16]


@pytest.mark.parametrize("contiguous", [True, False], ids=["contiguous", "strided"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_rows", [False, True], ids=["all-rows", "some-rows"])
@pytest.mark.parametrize("vocab", VOCAB)
def test_numpy_op_matches_reference(vocab: int, with_rows: bool, dtype: torch.dtype,
                                    contiguous: bool, gen: torch.Generator) -> None:
    logits, bitmask, rows = build(gen, vocab, torch.float32, with_rows, torch.device("cpu"))
    logits = logits.to(dtype)
    if contiguous:
        logits = logits.contiguous()
    logits[0, 1] = float("nan")  # a NaN logit stays NaN where allowed, -inf where not
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, rows)
    apply_token_bitmask_cpu(logits, bitmask, rows)
    assert torch.equal(logits.isnan(), expected.isnan())
    assert torch.equal(logits.nan_to_num(0.5), expected.nan_to_num(0.5))
    if dtype == torch.float32:  # bit for bit, the NaN's payload included
        assert torch.equal(logits.view(torch.int32), expected.view(torch.int32))


@pytest.mark.parametrize("rows", [[0, 1, 2, 3, 4], [1, 2, 3], [3, 1, 4], [4], []],
                         ids=["all", "block", "scattered", "one", "none"])
def test_row_orders_match_reference(rows: list[int], gen: torch.Generator) -> None:
    logits = torch.randn(5, 49152, generator=gen)
    bitmask = torch.randint(-(2**31), 2**31, (len(rows), 1536), generator=gen,
                            dtype=torch.int64).to(torch.int32)
    index = torch.tensor(rows, dtype=torch.int64)
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, index)
    apply_token_bitmask_cpu(logits, bitmask, index)
    assert torch.equal(logits.view(torch.int32), expected.view(torch.int32))


def test_repeated_rows_go_to_the_reference(gen: torch.Generator) -> None:
    logits = torch.randn(3, 100, generator=gen)
    bitmask = torch.randint(-(2**31), 2**31, (2, 4), generator=gen,
                            dtype=torch.int64).to(torch.int32)
    rows = torch.tensor([1, 1])
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, rows)
    apply_token_bitmask_cpu(logits, bitmask, rows)
    assert torch.equal(logits, expected)


def test_the_native_set_applies_masks_with_it() -> None:
    assert NATIVE_OPS.apply_token_bitmask is apply_token_bitmask_cpu
