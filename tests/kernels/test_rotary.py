"""Rotary embedding: the reference against Hugging Face's rotate_half formula, the Triton
kernel against the reference, and the per-forward rows variant bit-identical to the
reference."""

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

from radixlm.kernels import rotary_ref, rotary_rows, rotary_rows_ref

MAX_POS = 500
SHAPES = [  # (num_q_heads, num_kv_heads, head_dim)
    pytest.param(4, 4, 64, id="q4-k4-d64"),
    pytest.param(8, 2, 128, id="q8-k2-d128"),
    pytest.param(12, 3, 96, id="q12-k3-d96"),
]
DTYPES = [torch.float32, torch.bfloat16, torch.float16]


def tables(head_dim: int, theta: float = 10000.0) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin [MAX_POS, head_dim / 2] as the model builds them (float32)."""
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
    freqs = torch.arange(MAX_POS).float()[:, None] * inv_freq[None, :]
    return freqs.cos(), freqs.sin()


def build(gen: torch.Generator, hq: int, hk: int, head_dim: int, dtype: torch.dtype,
          device: torch.device) -> tuple[torch.Tensor, ...]:
    """q, k as strided views of one fused QKV projection output, as the model passes them."""
    tokens = randint(gen, 1, 13)
    qkv = randn(gen, tokens, (hq + 2 * hk) * head_dim, dtype=dtype, device=device)
    q = qkv[:, : hq * head_dim].view(tokens, hq, head_dim)
    k = qkv[:, hq * head_dim : (hq + hk) * head_dim].view(tokens, hk, head_dim)
    positions = torch.randint(0, MAX_POS, (tokens,), generator=gen).to(device)
    cos, sin = tables(head_dim)
    return q, k, positions, cos.to(device), sin.to(device)


def hf_rotary(x: torch.Tensor, positions: torch.Tensor, cos: torch.Tensor,
              sin: torch.Tensor) -> torch.Tensor:
    """Hugging Face Llama, in float64: tables of full width (each half-table twice, as HF's
    ``cat((freqs, freqs))``), then ``x * cos + rotate_half(x) * sin``."""
    cos_full = torch.cat((cos, cos), dim=-1)[positions].double()[:, None]  # [T, 1, D]
    sin_full = torch.cat((sin, sin), dim=-1)[positions].double()[:, None]
    x1, x2 = x.double().chunk(2, dim=-1)
    return x.double() * cos_full + torch.cat((-x2, x1), dim=-1) * sin_full


@pytest.mark.parametrize(("hq", "hk", "head_dim"), SHAPES)
def test_reference_matches_hf_rotate_half(hq: int, hk: int, head_dim: int,
                                          gen: torch.Generator) -> None:
    q, k, positions, cos, sin = build(gen, hq, hk, head_dim, torch.float32, torch.device("cpu"))
    q_rot, k_rot = rotary_ref(q, k, positions, cos, sin)
    assert_close(q_rot, hf_rotary(q, positions, cos, sin), 1e-5)
    assert_close(k_rot, hf_rotary(k, positions, cos, sin), 1e-5)


@pytest.mark.triton_interpret
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("hq", "hk", "head_dim"), SHAPES)
def test_triton_matches_reference(hq: int, hk: int, head_dim: int, dtype: torch.dtype,
                                  gen: torch.Generator, device: torch.device) -> None:
    from radixlm.kernels.triton.rotary import rotary_triton

    q, k, positions, cos, sin = build(gen, hq, hk, head_dim, dtype, device)
    q_out = poisoned(tuple(q.shape), dtype, device)
    k_out = poisoned(tuple(k.shape), dtype, device)
    rotary_triton(q, k, positions, cos, sin, q_out=q_out, k_out=k_out)
    q_ref, k_ref = rotary_ref(q, k, positions, cos, sin)
    assert_close(q_out, q_ref, TOL[dtype])
    assert_close(k_out, k_ref, TOL[dtype])


BAD_ARGS: list[BadArg] = [
    ("q-2d", lambda a: a.update(q=a["q"][:, 0]), ValueError, "q: expected 3 dimensions"),
    ("k-dtype", lambda a: a.update(k=a["k"].double()), TypeError, "k: expected dtype"),
    ("k-tokens", lambda a: a.update(k=a["k"][1:]), ValueError, "k: expected size"),
    ("odd-head-dim", lambda a: a.update(q=a["q"][..., :63], k=a["k"][..., :63]), ValueError,
     "q: head_dim must be even"),
    ("cos-width", lambda a: a.update(cos=a["cos"][:, :16], sin=a["sin"][:, :16]), ValueError,
     "cos: expected size 32"),
    ("positions-float", lambda a: a.update(positions=a["positions"].float()), TypeError,
     "positions: expected dtype"),
    ("positions-len", lambda a: a.update(positions=a["positions"][1:]), ValueError,
     "positions: expected size"),
    ("sin-device", lambda a: a.update(sin=a["sin"].to("meta")), ValueError,
     "sin: expected a tensor on"),
    ("k-inner-stride", lambda a: a.update(k=torch.cat((a["k"], a["k"]), 2)[..., ::2]),
     ValueError, "k: expected the last dimension"),
    ("q-out-shape", lambda a: a.update(q_out=a["k"].clone()), ValueError, "q_out: expected"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(BAD_ARGS))
def test_triton_rejects_bad_arguments_before_launch(
    mutate: Callable[[dict], None], exc: type[Exception], match: str, gen: torch.Generator,
    no_launch: None,
) -> None:
    from radixlm.kernels.triton.rotary import rotary_triton

    q, k, positions, cos, sin = build(gen, 4, 2, 64, torch.float32, torch.device("cpu"))
    if q.shape[0] == 1:  # "k-tokens" and "positions-len" need two tokens to drop one
        q, k, positions = (torch.cat((t, t)) for t in (q, k, positions))
    args = dict(q=q, k=k, positions=positions, cos=cos, sin=sin)
    assert_rejected(rotary_triton, args, mutate, exc, match)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize(("hq", "hk", "head_dim"), SHAPES)
def test_rows_variant_is_bit_identical_to_reference(hq: int, hk: int, head_dim: int,
                                                    dtype: torch.dtype,
                                                    gen: torch.Generator) -> None:
    """q and k heads rotated together (the fused QKV view), with rows gathered once."""
    q, k, positions, cos, sin = build(gen, hq, hk, head_dim, dtype, torch.device("cpu"))
    qk = q.as_strided((q.shape[0], hq + hk, head_dim), q.stride())  # q heads then k heads
    rows = rotary_rows(positions, cos, sin, dtype)
    out = rotary_rows_ref(qk, *rows)
    q_ref, k_ref = rotary_ref(q, k, positions, cos, sin)
    assert out.is_contiguous() and out.dtype == dtype
    assert torch.equal(out[:, :hq], q_ref) and torch.equal(out[:, hq:], k_ref)


ROWS_BAD_ARGS: list[BadArg] = [
    ("qk-2d", lambda a: a.update(qk=a["qk"][:, 0]), ValueError, "qk: expected 3 dimensions"),
    ("rows-tokens", lambda a: a.update(cos=a["cos"][1:], sin=a["sin"][1:]), ValueError,
     "cos/sin: expected rows of shape"),
    ("rows-dtype", lambda a: a.update(cos=a["cos"].double(), sin=a["sin"].double()),
     TypeError, "cos/sin: expected dtype"),
]


@pytest.mark.parametrize(("mutate", "exc", "match"), bad_arg_params(ROWS_BAD_ARGS))
def test_rows_variant_rejects_bad_arguments(mutate: Callable[[dict], None], exc: type[Exception],
                                            match: str, gen: torch.Generator) -> None:
    q, k, positions, cos, sin = build(gen, 4, 2, 64, torch.float32, torch.device("cpu"))
    qk = torch.cat((q, k), 1)
    if qk.shape[0] == 1:  # "rows-tokens" needs two tokens to drop one
        qk, positions = torch.cat((qk, qk)), torch.cat((positions, positions))
    c, s = rotary_rows(positions, cos, sin, torch.float32)
    assert_rejected(rotary_rows_ref, dict(qk=qk, cos=c, sin=s), mutate, exc, match)
