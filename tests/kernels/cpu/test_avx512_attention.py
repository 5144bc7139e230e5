"""The native shared-prefix and causal prefill attention (avx512_attention.c through
kernels/cpu/avx512_attention.py) against the float64 matmul reference on random odd sizes,
on pool views as the cascade decode passes them; the cases it was not built for go to torch's
``partial_attention`` unchanged."""

from __future__ import annotations

import pytest
import torch

from radixlm.kernels.cpu import avx512_attention as native
from radixlm.kernels.cpu import row_ops as cpu_row_ops
from radixlm.kernels.reference.attention_common import partial_attention, partial_attention_matmul
from radixlm.kernels.reference.decode_attention import decode_attention_ref, plan_decode_padded

pytestmark = pytest.mark.skipif(
    not native.prefix_attention_available(),
    reason="radixlm.kernels.cpu.native.avx512_attention is not built or this CPU lacks AVX-512 "
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
    (2, 4, 200, 128), (1, 6, 64, 64), (4, 11, 1, 128), (1, 13, 97, 256), (2, 6, 64, 256)])
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


@pytest.fixture
def kernel_calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """The native kernel's calls from here on (each runs the real kernel)."""
    calls: list[tuple] = []
    real = native._NATIVE.prefix_attention
    monkeypatch.setattr(native, "_NATIVE", type("Spy", (), {
        "prefix_attention": staticmethod(lambda *a: calls.append(a) or real(*a))})())
    return calls


def test_the_native_set_cascade_takes_the_kernel(kernel_calls: list[tuple]) -> None:
    """The native kernel set's shared-prefix decode reaches this kernel (a silent fallback to
    torch would lose the point)."""
    calls = kernel_calls
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


def _causal_want(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, first: int,
                 sm_scale: float) -> torch.Tensor:
    """float64 causal attention: token t (key position first + t) sees keys 0 .. first + t."""
    n, hq, d = q.shape
    hkv, length = k.shape[1], first + n
    kk = k[0, :, :length].double().repeat_interleave(hq // hkv, dim=0)  # [Hq, L, D]
    vv = v[0, :, :length].double().repeat_interleave(hq // hkv, dim=0)
    scores = torch.einsum("thd,hld->htl", q.double(), kk) * sm_scale
    visible = torch.arange(length)[None, :] <= (first + torch.arange(n))[:, None]  # [n, L]
    probs = scores.masked_fill(~visible, float("-inf")).softmax(-1)
    return torch.einsum("htl,hld->thd", probs, vv)


# (tokens, first, Hq, Hkv, D): one token; rows across 64-key blocks and 6-row blocks (tokens
# whose limits straddle a key block, so a row block has rows that see none of it); a prefix
# before the tokens; one query head per KV head; D 128; D 256 (Gemma 3: 4 query heads, 1 KV)
@pytest.mark.parametrize(("n", "first", "hq", "hkv", "dim"), [
    (1, 0, 9, 3, 64), (65, 0, 9, 3, 64), (130, 0, 2, 1, 64), (64, 64, 4, 4, 64),
    (23, 301, 9, 3, 64), (200, 0, 6, 2, 128), (7, 120, 1, 1, 128), (97, 31, 8, 2, 64),
    (131, 0, 4, 1, 256), (5, 70, 2, 2, 256)])
def test_causal_prefill_matches_the_float64_reference(n: int, first: int, hq: int, hkv: int,
                                                      dim: int) -> None:
    gen = torch.Generator().manual_seed(n * 7 + first)
    q = torch.randn(n, hq, dim, generator=gen)
    _, k, v = _pool_case(hkv, 1, first + n + 9, dim, gen)  # longer than needed: cut at L
    got = native.causal_prefill_attention(q, k, v, dim**-0.5, 0.0, first)
    assert got is not None and got.shape == (n, hq, dim)
    atol = 2e-6 if dim <= 128 else 4e-6  # scores summed over 256 float32 products
    torch.testing.assert_close(got, _causal_want(q, k, v, first, dim**-0.5).float(),
                               rtol=1e-5, atol=atol)


def test_causal_prefill_declines_what_it_was_not_built_for() -> None:
    """None (the caller's torch path) for a logit cap, another head size or dtype, a query
    past the keys; the native set's extend attention then gives the reference's result."""
    gen = torch.Generator().manual_seed(2)
    q = torch.randn(5, 4, 64, generator=gen)
    _, k, v = _pool_case(2, 1, 5, 64, gen)
    assert native.causal_prefill_attention(q, k, v, 0.125, 30.0, 0) is None
    assert native.causal_prefill_attention(q.double(), k, v, 0.125, 0.0, 0) is None
    assert native.causal_prefill_attention(q, k, v, 0.125, 0.0, 1) is None  # 6 > 5 keys
    _, k32, v32 = _pool_case(2, 1, 5, 32, gen)
    assert native.causal_prefill_attention(q[..., :32].contiguous(), k32, v32, 0.2, 0.0,
                                           0) is None


def _extend_case(indptr: list[int], pages: int, hq: int, hkv: int, dim: int,
                 gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """(q, k_cache, v_cache, qo_indptr, kv_indptr, slots): prefills of the request sizes in
    ``indptr`` (no cached prefix) over random slots of a pool of ``pages`` 8-token pages."""
    tokens = indptr[-1]
    k_cache, v_cache = torch.randn(pages, 8, hkv, dim, generator=gen), \
        torch.randn(pages, 8, hkv, dim, generator=gen)
    slots = torch.randperm(8 * pages, generator=gen)[:tokens]
    q = torch.randn(tokens, hq, dim, generator=gen)
    return q, k_cache, v_cache, torch.tensor(indptr), torch.tensor(indptr), slots


def test_the_native_set_prefill_takes_the_causal_kernel(kernel_calls: list[tuple]) -> None:
    """The native kernel set's extend attention reaches the causal kernel for a request with
    no shared prefix, and equals the torch set's result."""
    from radixlm.kernels.cpu.ops import NATIVE_OPS
    from radixlm.kernels.reference.ops import TORCH_OPS
    calls = kernel_calls
    args = _extend_case([0, 100, 150], 40, 9, 3, 64, torch.Generator().manual_seed(4)) + (
        0.125,)
    got = NATIVE_OPS.extend_attention(*args)
    assert len(calls) == 2, "one call per request"
    torch.testing.assert_close(got, TORCH_OPS.extend_attention(*args), rtol=1e-5, atol=2e-6)


def test_a_window_over_the_whole_request_takes_the_causal_kernel(
        kernel_calls: list[tuple]) -> None:
    """A sliding window as long as a request's keys or longer masks nothing more than the
    causal mask (a prompt shorter than Gemma 3's local window): the native set runs the
    causal kernel, and equals the torch set's windowed result; a shorter window does not."""
    from radixlm.kernels.cpu.ops import NATIVE_OPS
    from radixlm.kernels.reference.ops import TORCH_OPS
    calls = kernel_calls
    args = _extend_case([0, 130], 30, 4, 1, 256, torch.Generator().manual_seed(5)) + (
        0.0625, 0.0)
    for window in (130, 512):
        got = NATIVE_OPS.extend_attention(*args, window)
        torch.testing.assert_close(got, TORCH_OPS.extend_attention(*args, window), rtol=1e-5,
                                   atol=2e-6)
    assert len(calls) == 2
    NATIVE_OPS.extend_attention(*args, 129)
    assert len(calls) == 2, "a window shorter than the keys is torch's masked path"


@pytest.mark.parametrize(("n", "first", "hq", "hkv", "dim"), [
    (1, 0, 9, 3, 64), (70, 0, 9, 3, 64), (33, 40, 4, 1, 256), (130, 0, 4, 1, 256),
    (50, 14, 6, 2, 128)])
def test_causal_prefill_by_slot_reads_the_pool_in_place(n: int, first: int, hq: int, hkv: int,
                                                        dim: int) -> None:
    """The keys read from a paged pool through scattered slots (no gathered copy) and the rows
    written into the caller's ``out``: the same as the kernel on the gathered keys, within
    rounding of the float64 reference."""
    gen = torch.Generator().manual_seed(n + first)
    k_cache, v_cache = torch.randn(40, 8, hkv, dim, generator=gen), \
        torch.randn(40, 8, hkv, dim, generator=gen)
    slots = torch.randperm(320, generator=gen)[:first + n]
    q = torch.randn(n, hq, dim, generator=gen)
    out = torch.full((n + 2, hq, dim), 7.0)
    got = native.causal_prefill_by_slot(q, k_cache, v_cache, slots, dim**-0.5, 0.0, first,
                                        out[1:-1])
    assert got is not None and got.data_ptr() == out[1].data_ptr()
    assert bool((out[0] == 7).all()) and bool((out[-1] == 7).all()), "rows outside untouched"
    k, v = (c.view(-1, hkv, dim)[slots].transpose(0, 1)[None] for c in (k_cache, v_cache))
    assert torch.equal(got, native.causal_prefill_attention(q, k, v, dim**-0.5, 0.0, first))
    atol = 2e-6 if dim <= 128 else 4e-6
    torch.testing.assert_close(got, _causal_want(q, k, v, first, dim**-0.5).float(),
                               rtol=1e-5, atol=atol)


def test_causal_prefill_by_slot_checks_the_slots() -> None:
    """A slot outside the pool raises before any work; what the kernel was not built for (an
    int32 index, a logit cap, keys not ending at the last token) is None, nothing written."""
    gen = torch.Generator().manual_seed(6)
    k_cache, v_cache = torch.randn(4, 8, 1, 64, generator=gen), \
        torch.randn(4, 8, 1, 64, generator=gen)
    q, out = torch.randn(3, 2, 64, generator=gen), torch.zeros(3, 2, 64)
    with pytest.raises(IndexError, match="outside the pool"):
        native.causal_prefill_by_slot(q, k_cache, v_cache, torch.tensor([0, 1, 32]), 0.125,
                                      0.0, 0, out)
    for slots, cap, first in ((torch.tensor([0, 1, 2], dtype=torch.int32), 0.0, 0),
                              (torch.tensor([0, 1, 2]), 30.0, 0),
                              (torch.tensor([0, 1, 2, 3]), 0.0, 0)):
        assert native.causal_prefill_by_slot(q, k_cache, v_cache, slots, 0.125, cap, first,
                                             out) is None
    assert not bool(out.any())
