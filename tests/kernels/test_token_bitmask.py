"""Grammar bitmasks: the reference against a bit-by-bit loop, the Triton kernel against the
reference (exactly: logits are either untouched or -inf)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from kernel_testlib import BadArg, assert_rejected, bad_arg_params, randint, randn

from radixlm.kernels import apply_token_bitmask_ref

VOCAB = [pytest.param(v, id=f"v{v}") for v in (1000, 2240, 2049)]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def build(gen: torch.Generator, vocab: int, dtype: torch.dtype, with_rows: bool,
          device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """Logits as strided rows of a wider buffer; random masks (sign bits included) with a
    spare word; with_rows: masks for a random subset of the rows, in random order."""
    num_rows = randint(gen, 2, 7)
    logits = randn(gen, num_rows, vocab + 5, dtype=dtype, device=device)[:, :vocab]
    rows = torch.randperm(num_rows, generator=gen)[: randint(gen, 1, num_rows - 1)]
    num_masks = rows.shape[0] if with_rows else num_rows
    words = (vocab + 31) // 32 + 1
    bitmask = torch.randint(-(2**31), 2**31, (num_masks, words), generator=gen,
                            dtype=torch.int64).to(torch.int32)
    bitmask[0, :4] = -1  # whole words allowed, and all-forbidden ones
    bitmask[0, 4:8] = 0
    return logits, bitmask.to(device), rows.to(device) if with_rows else None


@pytest.mark.parametrize("with_rows", [False, True], ids=["all-rows", "some-rows"])
@pytest.mark.parametrize("vocab", VOCAB)
def test_reference_matches_bit_loop(vocab: int, with_rows: bool, gen: torch.Generator) -> None:
    logits, bitmask, rows = build(gen, vocab, torch.float32, with_rows, torch.device("cpu"))
    expected = logits.clone()
    targets = range(logits.shape[0]) if rows is None else rows.tolist()
    for r, row in enumerate(targets):
        words = [w & 0xFFFFFFFF for w in bitmask[r].tolist()]  # as unsigned 32-bit
        for t in range(vocab):
            if not (words[t // 32] >> (t % 32)) & 1:
                expected[row, t] = float("-inf")
    apply_token_bitmask_ref(logits, bitmask, rows)
    assert torch.equal(logits, expected)


@pytest.mark.triton_interpret
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("with_rows", [False, True], ids=["all-rows", "some-rows"])
@pytest.mark.parametrize("vocab", VOCAB)
def test_triton_matches_reference(vocab: int, with_rows: bool, dtype: torch.dtype,
                                  gen: torch.Generator, device: torch.device) -> None:
    from radixlm.kernels.triton.token_bitmask import apply_token_bitmask_triton

    logits, bitmask, rows = build(gen, vocab, dtype, with_rows, device)
    expected = logits.clone()
    apply_token_bitmask_ref(expected, bitmask, rows)
    apply_token_bitmask_triton(logits, bitmask, rows)
    assert torch.equal(logits, expected)


BAD_ARGS: list[BadArg] = [
    ("logits-1d", lambda a: a.update(logits=a["logits"][0]), ValueError,
     "logits: expected 2 dimensions"),
    ("bitmask-int64", lambda a: a.update(bitmask=a["bitmask"].long()), TypeError,
     "bitmask: expected dtype"),
    ("bitmask-words", lambda a: a.update(bitmask=a["bitmask"][:, :3]), ValueError,
     "bitmask: expected at least"),
    ("bitmask-rows", lambda a: a.update(bitmask=a["bitmask"][1:]), ValueError,
     "bitmask: expected"),
    ("rows-float", lambda a: a.update(rows=a["rows"].float()), TypeError, "rows: expected dtype"),
    ("rows-device", lambda a: a.update(rows=a["rows"].to("meta")), ValueError,
     "rows: expected a tensor on"),
    ("logits-inner-stride", lambda a: a.update(logits=a["logits"].t().contiguous().t()),
     ValueError, "logits: expected the last dimension"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(BAD_ARGS))
def test_triton_rejects_bad_arguments_before_launch(
    mutate: Callable[[dict], None], exc: type[Exception], match: str, gen: torch.Generator,
    no_launch: None,
) -> None:
    from radixlm.kernels.triton.token_bitmask import apply_token_bitmask_triton

    logits, bitmask, rows = build(gen, 1000, torch.float32, True, torch.device("cpu"))
    args = dict(logits=logits, bitmask=bitmask, rows=rows)
    assert_rejected(apply_token_bitmask_triton, args, mutate, exc, match)
