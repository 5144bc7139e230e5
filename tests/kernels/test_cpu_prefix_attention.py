"""The native shared-prefix attention (avx512_attention.c through
kernels/cpu_prefix_attention.py) against the float64 matmul reference on random odd sizes,
on pool views as the cascade decode passes them; the cases it was not built for go to torch's
``partial_attention`` unchanged."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels import cpu_prefix_attention as native
from radixlm.kernels import cpu_row_ops
from radixlm.kernels.attention_common import partial_attention, partial_attention_matmul
from radixlm.kernels.decode_attention import decode_attention_ref, plan_decode_padded

pytestmark = pytest.mark.skipif(
    not native.prefix_attention_available(),
    reason="radixlm.kernels.native.prefix_attention is not built or this CPU lacks AVX-512 "
           "(python setup.py build_ext --inplace)")


def _pool_case(hkv: int, rows: int, length: int, dim: int, gen: torch.Generator
               ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """q [1, Hkv, R, D]; k, v [1, Hkv, L, D] views of a pool [slots, Hkv, D] (strided)."""
    q = torch.randn(1, hkv, rows, dim, generator=gen)
    k_pool = 2 * torch.randn(length + 11, hkv, dim, generator=gen)
    v_pool = torch.randn(length + 11, hkv, dim, generator=gen)
    return (q, k_pool[5:5 + length].transpose(0, 1)[None],
            v_pool[5:5 + length].transpose(0, 1)[None])


@pytest.mark.parametrize(("hkv", "rows", "length", "dim"), [
    (1, 1, 1, 64), (2, 7, 63, 64), (3, 13, 65, 64), (3, 96, 300, 64), (1, 5, 129, 128),
    (2, 4, 200, 128), (1, 6, 64, 64), (4, 11, 1, 128)])
def test_matches_the_float64_reference(hkv: int, rows: int, length: int, dim: int) -> None:
    gen = torch.Generator().manual_seed(rows * 1000 + length)
    q, k, v = _pool_case(hkv, rows, length, dim, gen)
    assert native._native_case(q, k, v, None, 0.0), "the case must take the kernel"
    out, lse = native.prefix_partial_attention(q, k, v, None, dim**-0.5, 0.0)
    want_out, want_lse = partial_attention_matmul(q.double(), k.double(), v.double(), None,
                                                  dim**-0.5, 0.0)
    assert out.shape == q.shape and lse.shape == (1, hkv, rows, 1)
    torch.testing.assert_close(out, want_out.float(), rtol=1e-5, atol=2e-6)
    torch.testing.assert_close(lse, want_lse.float(), rtol=1e-6, atol=2e-6)


def test_no_key_gives_zero_weight() -> None:
    q, k, v = _pool_case(2, 3, 0, 64, torch.Generator().manual_seed(0))
    out, lse = native.prefix_partial_attention(q, k, v, None, 0.125, 0.0)
    assert torch.equal(out, torch.zeros_like(q)) and bool(torch.isneginf(lse).all())


def test_large_scores_stay_finite() -> None:
    """Scores near float's exponent range: the running max keeps every e^x in range."""
    q, k, v = _pool_case(1, 6, 150, 64, torch.Generator().manual_seed(1))
    out, lse = native.prefix_partial_attention(q * 40, k * 40, v, None, 1.0, 0.0)
    want_out, want_lse = partial_attention_matmul((q * 40).double(), (k * 40).double(),
                                                  v.double(), None, 1.0, 0.0)
    assert bool(torch.isfinite(out).all())
    torch.testing.assert_close(out, want_out.float(), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, want_lse.float(), rtol=1e-5, atol=1e-3)


@pytest.mark.parametrize("case", ["mask", "cap", "dim", "batch", "dtype"])
def test_other_cases_go_to_partial_attention(case: str) -> None:
    gen = torch.Generator().manual_seed(2)
    dim = 32 if case == "dim" else 64
    q, k, v = _pool_case(2, 5, 40, dim, gen)
    mask, cap = None, 0.0
    if case == "mask":
        mask = torch.rand(1, 1, 1, 40, generator=gen) > 0.3
    elif case == "cap":
        cap = 3.0
    elif case == "batch":
        q, k, v = q.expand(2, -1, -1, -1).contiguous(), k.expand(2, -1, -1, -1), \
            v.expand(2, -1, -1, -1)
    elif case == "dtype":
        q, k, v = q.double(), k.double(), v.double()
    assert not native._native_case(q, k, v, mask, cap)
    got = native.prefix_partial_attention(q, k, v, mask, 0.2, cap)
    want = partial_attention(q, k, v, mask, 0.2, cap)
    for a, b in zip(got, want, strict=True):
        torch.testing.assert_close(a, b)


def test_the_native_set_cascade_takes_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    """The native kernel set's shared-prefix decode reaches this kernel (a silent fallback to
    torch would lose the point)."""
    calls = []
    real = native._NATIVE.prefix_attention
    monkeypatch.setattr(native, "_NATIVE", type("Spy", (), {
        "prefix_attention": staticmethod(lambda *a: calls.append(a) or real(*a))})())
    gen = torch.Generator().manual_seed(3)
    k_cache, v_cache = torch.randn(400, 1, 3, 64, generator=gen), \
        torch.randn(400, 1, 3, 64, generator=gen)
    doc = torch.arange(300)
    seqs = [torch.cat([doc, torch.tensor([300 + i, 310 + i])]) for i in range(4)]
    lens = torch.tensor([len(s) for s in seqs])
    padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)])
    q = torch.randn(4, 9, 64, generator=gen)
    plan = plan_decode_padded(padded, lens, 1, 0, {})
    assert plan.groups, "the case must take the cascade"
    args = (q, k_cache, v_cache, indptr, torch.cat(seqs), 0.125, 0.0, 0)
    got = cpu_row_ops.decode_attention(*args, plan=plan)
    plain = plan_decode_padded(padded, lens, 1, 0, None, cascade=False)
    torch.testing.assert_close(got, decode_attention_ref(*args, plan=plain), rtol=1e-5,
                               atol=1e-6)
    assert len(calls) == 1
