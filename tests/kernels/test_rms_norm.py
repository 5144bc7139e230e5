"""RMSNorm (plain and fused with the residual add): reference against the textbook formula,
the Triton kernel against the reference."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch
from kernel_testlib import (
    TOL,
    BadArg,
    assert_close,
    assert_rejected,
    bad_arg_params,
    poisoned,
    randint,
    randn,
)

from radixlm.kernels import fused_add_rms_norm_ref, rms_norm_ref
from radixlm.kernels.reference.rms_norm import hf_rms_norm

EPS = 1e-6
HIDDEN = [pytest.param(h, id=f"h{h}") for h in (300, 1024, 4100)]
DTYPES = [  # (activation dtype, weight dtype)
    pytest.param(torch.float32, torch.float32, id="f32"),
    pytest.param(torch.bfloat16, torch.bfloat16, id="bf16"),
    pytest.param(torch.float16, torch.float32, id="f16-w32"),
]


def build(gen: torch.Generator, hidden: int, dtype: torch.dtype, w_dtype: torch.dtype,
          device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x as a strided view (rows of a wider buffer), a residual, a weight near 1."""
    rows = randint(gen, 2, 9)  # >= 2: a transposed view then has a non-unit inner stride
    x = randn(gen, rows, hidden + 8, dtype=dtype, device=device)[:, 3 : 3 + hidden]
    residual = randn(gen, rows, hidden, dtype=dtype, device=device)
    weight = (1.0 + 0.1 * randn(gen, hidden)).to(dtype=w_dtype, device=device)
    return x, residual, weight


def textbook(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    xd = x.double()
    return weight.double() * xd / torch.sqrt(xd.pow(2).mean(-1, keepdim=True) + EPS)


@pytest.mark.parametrize("hidden", HIDDEN)
def test_reference_matches_textbook(hidden: int, gen: torch.Generator) -> None:
    x, residual, weight = build(gen, hidden, torch.float32, torch.float32, torch.device("cpu"))
    assert_close(rms_norm_ref(x, weight, EPS), textbook(x, weight), 1e-5)
    normed, summed = fused_add_rms_norm_ref(x, residual, weight, EPS)
    assert torch.equal(summed, x + residual)
    assert_close(normed, textbook(x + residual, weight), 1e-5)


@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("rows", [1, 5, 32, 513])
def test_float32_reference_is_bit_identical_to_the_hugging_face_lines(hidden, rows, gen):
    """The float32 path (four calls, two in place) must equal HF's formula exactly, and
    torch.rms_norm, which it replaced, too."""
    x = randn(gen, rows, hidden, dtype=torch.float32, device="cpu") * 3
    weight = 1.0 + 0.1 * randn(gen, hidden)
    out = rms_norm_ref(x, weight, EPS)
    assert torch.equal(out, hf_rms_norm(x, weight, EPS))
    assert torch.equal(out, torch.rms_norm(x, (hidden,), weight, EPS))


@pytest.mark.triton_interpret
@pytest.mark.parametrize(("dtype", "w_dtype"), DTYPES)
@pytest.mark.parametrize("hidden", HIDDEN)
@pytest.mark.parametrize("fused", [False, True], ids=["plain", "fused"])
def test_triton_matches_reference(fused: bool, hidden: int, dtype: torch.dtype,
                                  w_dtype: torch.dtype, gen: torch.Generator,
                                  device: torch.device) -> None:
    from radixlm.kernels.triton.rms_norm import fused_add_rms_norm_triton, rms_norm_triton

    x, residual, weight = build(gen, hidden, dtype, w_dtype, device)
    x_before, r_before = x.clone(), residual.clone()
    out = poisoned(tuple(x.shape), torch.promote_types(dtype, w_dtype), device)
    if not fused:
        assert rms_norm_triton(x, weight, EPS, out=out) is out
        assert_close(out, rms_norm_ref(x, weight, EPS), TOL[dtype])
        return
    summed = poisoned(tuple(x.shape), dtype, device)
    fused_add_rms_norm_triton(x, residual, weight, EPS, out=out, residual_out=summed)
    ref_normed, ref_summed = fused_add_rms_norm_ref(x, residual, weight, EPS)
    assert_close(summed, ref_summed, TOL[dtype])
    assert_close(out, ref_normed, TOL[dtype])
    assert torch.equal(x, x_before) and torch.equal(residual, r_before), "inputs modified"


BAD_ARGS: list[BadArg] = [
    ("x-3d", lambda a: a.update(x=a["x"][None]), ValueError, "x: expected 2 dimensions"),
    ("x-int", lambda a: a.update(x=a["x"].long()), TypeError, "x: expected dtype"),
    ("weight-size", lambda a: a.update(weight=a["weight"][1:]), ValueError,
     "weight: expected size"),
    ("residual-shape", lambda a: a.update(residual=a["residual"][:, 1:]), ValueError,
     "residual: expected shape"),
    ("residual-dtype", lambda a: a.update(residual=a["residual"].half()), TypeError,
     "residual: expected dtype"),
    ("weight-device", lambda a: a.update(weight=a["weight"].to("meta")), ValueError,
     "weight: expected a tensor on"),
    ("x-inner-stride", lambda a: a.update(x=a["x"].t().contiguous().t()), ValueError,
     "x: expected the last dimension"),
    ("out-dtype", lambda a: a.update(out=a["x"].half()), ValueError, "out: expected"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(BAD_ARGS))
def test_triton_rejects_bad_arguments_before_launch(
    mutate: Callable[[dict], None], exc: type[Exception], match: str, gen: torch.Generator,
    no_launch: None,
) -> None:
    from radixlm.kernels.triton.rms_norm import fused_add_rms_norm_triton

    x, residual, weight = build(gen, 300, torch.float32, torch.float32, torch.device("cpu"))
    x = x + 0  # contiguous rows, so only the mutation is wrong
    args = dict(x=x, residual=residual, weight=weight, eps=EPS)
    assert_rejected(fused_add_rms_norm_triton, args, mutate, exc, match)
