"""The native per-token kernels (row_ops.c through kernels/cpu/row_ops.py) against the torch
references on random odd sizes: rotary and the KV store bit-identical, norms and decode
attention to float32 rounding; cases they were not built for go to the reference; the native
kernel set runs a whole model as the torch set does."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from kernel_testlib import backends_side_by_side

from radixlm.kernels.cpu import row_ops as cpu_row_ops
from radixlm.kernels.reference.decode_attention import decode_attention_ref, plan_decode_padded
from radixlm.kernels.reference.kv_store import store_kv_ref
from radixlm.kernels.reference.qk_norm_rotary import qk_norm_rotary_ref
from radixlm.kernels.reference.rms_norm import fused_add_rms_norm_ref, rms_norm_ref
from radixlm.kernels.reference.rotary import rotary_rows, rotary_rows_ref
from radixlm.kernels.reference.silu_mul import gelu_tanh_mul_ref, silu_mul_ref

needs_kernel = pytest.mark.skipif(
    not cpu_row_ops.row_ops_available(),
    reason="radixlm.kernels.cpu.native.row_ops is not built (python setup.py build_ext --inplace)")
pytestmark = needs_kernel

# float32 rounding of sums over a few hundred terms in another order
RTOL, ATOL = 1e-5, 1e-6


@pytest.fixture
def gen() -> torch.Generator:
    return torch.Generator().manual_seed(18)


def _randn(*shape: int, gen: torch.Generator) -> torch.Tensor:
    return torch.randn(*shape, generator=gen)


@pytest.mark.parametrize(("rows", "hidden"), [(1, 1), (1, 7), (3, 576), (5, 1023), (17, 64)])
def test_norms_match_the_references(rows: int, hidden: int, gen: torch.Generator) -> None:
    x, res, w = _randn(rows, hidden, gen=gen), _randn(rows, hidden, gen=gen), \
        _randn(hidden, gen=gen)
    torch.testing.assert_close(cpu_row_ops.rms_norm(x, w, 1e-5), rms_norm_ref(x, w, 1e-5),
                               rtol=RTOL, atol=ATOL)
    out, summed = cpu_row_ops.fused_add_rms_norm(x, res, w, 1e-6)
    ref_out, ref_summed = fused_add_rms_norm_ref(x, res, w, 1e-6)
    assert torch.equal(summed, ref_summed)
    torch.testing.assert_close(out, ref_out, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("rows", "hidden"), [(1, 1), (3, 7), (4, 640), (9, 1023), (17, 64)])
def test_norm_add_rms_norm_is_the_two_native_norms(rows: int, hidden: int,
                                                   gen: torch.Generator) -> None:
    """Gemma 3's norm, residual add and norm in one call: bit-identical to rms_norm then
    fused_add_rms_norm (rows past a multiple of four too)."""
    x, res = _randn(rows, hidden, gen=gen), _randn(rows, hidden, gen=gen)
    w1, w2 = _randn(hidden, gen=gen), _randn(hidden, gen=gen)
    out, summed = cpu_row_ops.norm_add_rms_norm(x, w1, res, w2, 1e-6)
    want_out, want_summed = cpu_row_ops.fused_add_rms_norm(cpu_row_ops.rms_norm(x, w1, 1e-6),
                                                           res, w2, 1e-6)
    assert torch.equal(summed, want_summed) and torch.equal(out, want_out)


@pytest.mark.parametrize(("rows", "inter"), [(1, 1), (1, 1536), (3, 7), (5, 77), (2, 4099)])
def test_silu_mul_matches_the_reference(rows: int, inter: int, gen: torch.Generator) -> None:
    """Against torch's silu in float64 the C polynomial is as close as torch's own SLEEF; the
    clamped tails (|x| past 87) still give x or -0."""
    x = _randn(rows, 2 * inter, gen=gen) * 8
    x[0, :min(inter, 4)] = torch.tensor([-100.0, 100.0, -87.5, 88.5])[:min(inter, 4)]
    got, ref = cpu_row_ops.silu_mul(x), silu_mul_ref(x)
    gate, up = x.double().split(inter, -1)
    exact = torch.nn.functional.silu(gate) * up
    assert (got.double() - exact).abs().max() <= 2 * (ref.double() - exact).abs().max() + 1e-30
    torch.testing.assert_close(got, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("rows", "inter"), [(1, 1), (1, 2048), (3, 7), (5, 77), (2, 4099)])
def test_gelu_tanh_mul_matches_the_reference(rows: int, inter: int,
                                             gen: torch.Generator) -> None:
    """As close to the float64 tanh-GELU as torch's own, and within float32 rounding of it;
    the saturated tails (|x| past 10) give x and 0 as torch's do."""
    x = _randn(rows, 2 * inter, gen=gen) * 4
    x[0, :min(inter, 4)] = torch.tensor([-100.0, 100.0, -12.0, 1e-6])[:min(inter, 4)]
    got, ref = cpu_row_ops.gelu_tanh_mul(x), gelu_tanh_mul_ref(x)
    gate, up = x.double().split(inter, -1)
    exact = torch.nn.functional.gelu(gate, approximate="tanh") * up
    assert (got.double() - exact).abs().max() <= 2 * (ref.double() - exact).abs().max() + 1e-30
    torch.testing.assert_close(got, ref, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(("tokens", "q_heads", "kv_heads", "dim"),
                         [(1, 9, 3, 64), (3, 4, 4, 2), (7, 8, 2, 128), (2, 12, 3, 96)])
def test_rotary_rows_on_a_fused_qkv_view_is_bit_identical(
        tokens: int, q_heads: int, kv_heads: int, dim: int, gen: torch.Generator) -> None:
    qkv = _randn(tokens, (q_heads + 2 * kv_heads) * dim, gen=gen)
    qk = qkv[:, :(q_heads + kv_heads) * dim].view(tokens, q_heads + kv_heads, dim)
    positions = torch.randint(0, 300, (tokens,), generator=gen)
    cos, sin = rotary_rows(positions, _randn(300, dim // 2, gen=gen),
                           _randn(300, dim // 2, gen=gen), torch.float32)
    got = cpu_row_ops.rotary_rows(qk, cos, sin)
    assert got.is_contiguous() and torch.equal(got, rotary_rows_ref(qk, cos, sin))


@pytest.mark.parametrize(("tokens", "q_heads", "kv_heads", "dim"),
                         [(1, 9, 3, 64), (3, 4, 4, 2), (7, 8, 2, 128), (130, 4, 1, 256),
                          (2, 12, 3, 96)])
def test_qk_norm_rotary_is_the_native_norm_then_rotary(
        tokens: int, q_heads: int, kv_heads: int, dim: int, gen: torch.Generator) -> None:
    """Bit-identical to this module's rms_norm (on contiguous head rows) then rotary_rows, on
    a fused QKV view; within float32 rounding of the torch references; contiguous q and k."""
    qkv = _randn(tokens, (q_heads + 2 * kv_heads) * dim, gen=gen)
    qk = qkv[:, :(q_heads + kv_heads) * dim].view(tokens, q_heads + kv_heads, dim)
    wq, wk = _randn(dim, gen=gen), _randn(dim, gen=gen)
    cos, sin = rotary_rows(torch.randint(0, 300, (tokens,), generator=gen),
                           _randn(300, dim // 2, gen=gen), _randn(300, dim // 2, gen=gen),
                           torch.float32)
    q, k = cpu_row_ops.qk_norm_rotary(qk, q_heads, wq, wk, 1e-6, cos, sin)
    assert q.is_contiguous() and k.is_contiguous()
    assert q.shape == (tokens, q_heads, dim) and k.shape == (tokens, kv_heads, dim)
    heads = [cpu_row_ops.rms_norm(rows.reshape(-1, dim).contiguous(), w, 1e-6).view(tokens, -1, dim)
             for rows, w in ((qk[:, :q_heads], wq), (qk[:, q_heads:], wk))]
    two_steps = cpu_row_ops.rotary_rows(torch.cat(heads, 1), cos, sin)
    assert torch.equal(q, two_steps[:, :q_heads]) and torch.equal(k, two_steps[:, q_heads:])
    for got, want in zip((q, k), qk_norm_rotary_ref(qk, q_heads, wq, wk, 1e-6, cos, sin),
                         strict=True):
        torch.testing.assert_close(got, want, rtol=RTOL, atol=ATOL)


def test_store_kv_is_bit_identical_and_refuses_a_slot_outside(gen: torch.Generator) -> None:
    pool_k, pool_v = _randn(5, 4, 3, 16, gen=gen), _randn(5, 4, 3, 16, gen=gen)
    slots = torch.tensor([19, 0, 7])
    k, v = _randn(3, 3, 16, gen=gen), _randn(3, 3, 16, gen=gen)
    ref_k, ref_v = pool_k.clone(), pool_v.clone()
    store_kv_ref(ref_k, ref_v, slots, k, v)
    cpu_row_ops.store_kv(pool_k, pool_v, slots, k, v)
    assert torch.equal(pool_k, ref_k) and torch.equal(pool_v, ref_v)
    before = pool_k.clone()
    with pytest.raises(IndexError, match="slot 20 outside the pool of 20"):
        cpu_row_ops.store_kv(pool_k, pool_v, torch.tensor([1, 20, 2]), k, v)
    assert torch.equal(pool_k, before), "nothing is written when a slot is refused"


def test_store_kv_reads_strided_rows_in_place(gen: torch.Generator) -> None:
    """k and v as views of wider token rows (v's slice of a fused QKV projection, one token
    too) store what their contiguous copies would."""
    for tokens in (1, 4):
        qkv = _randn(tokens, 5 * 2 * 16, gen=gen)
        k = qkv[:, 3 * 2 * 16:4 * 2 * 16].view(tokens, 2, 16)
        v = qkv[:, 4 * 2 * 16:].view(tokens, 2, 16)
        assert not v.is_contiguous() or tokens == 1
        pool_k, pool_v = torch.zeros(3, 4, 2, 16), torch.zeros(3, 4, 2, 16)
        ref_k, ref_v = pool_k.clone(), pool_v.clone()
        slots = torch.tensor([9, 2, 11, 0])[:tokens]
        store_kv_ref(ref_k, ref_v, slots, k.contiguous(), v.contiguous())
        cpu_row_ops.store_kv(pool_k, pool_v, slots, k, v)
        assert torch.equal(pool_k, ref_k) and torch.equal(pool_v, ref_v)


def _decode_case(lens: list[int], q_heads: int, kv_heads: int, dim: int,
                 gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    pages, page = 9, 16
    k_cache, v_cache = _randn(pages, page, kv_heads, dim, gen=gen), \
        _randn(pages, page, kv_heads, dim, gen=gen)
    # each request's slots scattered over the pool (shared slots allowed), in sequence order
    indices = torch.cat([torch.randperm(pages * page, generator=gen)[:n] for n in lens])
    indptr = torch.tensor([0, *lens]).cumsum(0)
    q = _randn(len(lens), q_heads, dim, gen=gen)
    return q, k_cache, v_cache, indptr, indices


@pytest.fixture(params=["avx512", "portable"])
def decode_kernel(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each decode test on both native kernels: the AVX-512 one (head sizes 64 and 128, where
    built and the CPU has it) and the portable row_ops one (everything else)."""
    if request.param == "avx512" and not cpu_row_ops.AVX512_DECODE:
        pytest.skip("avx512_attention is not built or this CPU lacks AVX-512 F")
    monkeypatch.setattr(cpu_row_ops, "AVX512_DECODE", request.param == "avx512")
    return request.param


# head sizes 64 / 128 take the AVX-512 kernel: 1-8 query heads per KV head (its passes over
# the values: 4 heads of 64 or 2 of 128 at a time, and every remainder), windows, a cap
@pytest.mark.parametrize(("lens", "q_heads", "kv_heads", "dim", "window", "cap"), [
    ([1], 1, 1, 1, 0, 0.0), ([17], 9, 3, 64, 0, 0.0), ([5, 33, 1], 8, 2, 24, 0, 0.0),
    ([40, 3], 4, 4, 17, 6, 0.0), ([29], 6, 2, 64, 0, 5.0), ([100, 71, 9, 2], 2, 1, 128, 50, 0.0),
    ([3, 50], 8, 1, 64, 0, 0.0), ([7, 16, 1], 5, 1, 64, 0, 0.0), ([20, 1], 6, 2, 128, 0, 0.0),
    ([33], 7, 1, 128, 9, 3.0), ([2, 18], 2, 2, 64, 0, 0.0),
])
def test_decode_attention_matches_the_reference(lens: list[int], q_heads: int, kv_heads: int,
                                                dim: int, window: int, cap: float,
                                                gen: torch.Generator, decode_kernel: str) -> None:
    q, k_cache, v_cache, indptr, indices = _decode_case(lens, q_heads, kv_heads, dim, gen)
    args = (q, k_cache, v_cache, indptr, indices, dim**-0.5, cap, window)
    torch.testing.assert_close(cpu_row_ops.decode_attention(*args), decode_attention_ref(*args),
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("dim", [8, 64])
def test_decode_attention_refuses_a_slot_outside_the_pool_or_a_keyless_request(
        gen: torch.Generator, dim: int,
        decode_kernel: str) -> None:
    q, k_cache, v_cache, indptr, indices = _decode_case([4], 2, 1, dim, gen)
    indices[2] = k_cache.shape[0] * k_cache.shape[1]
    with pytest.raises(IndexError, match="outside the pool"):
        cpu_row_ops.decode_attention(q, k_cache, v_cache, indptr, indices, 0.3)
    empty = torch.tensor([0, 4, 4])  # a second request with no key
    with pytest.raises(ValueError, match="request 1 has no KV token"):
        cpu_row_ops.decode_attention(torch.cat([q, q]), k_cache, v_cache, empty, indices, 0.3)


def _cascade_case(shapes: list[tuple[int, int]], q_heads: int, kv_heads: int, dim: int,
                  page: int, gen: torch.Generator) -> tuple[torch.Tensor, ...]:
    """Requests (shared, own): the first ``shared`` slots of one document (two groups when
    prefixes differ), then ``own`` slots of their own, scattered over the pool."""
    pages = 1200 // page  # room for the longest document and every own part
    k_cache, v_cache = _randn(pages, page, kv_heads, dim, gen=gen), \
        _randn(pages, page, kv_heads, dim, gen=gen)
    perm = torch.randperm(pages * page, generator=gen)
    doc, rest = perm[:max(s for s, _ in shapes)], perm[max(s for s, _ in shapes):]
    seqs, used = [], 0
    for shared, own in shapes:
        seqs.append(torch.cat([doc[:shared], rest[used:used + own]]))
        used += own
    lens = torch.tensor([len(s) for s in seqs])
    padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    indptr = torch.cat([torch.zeros(1, dtype=torch.long), lens.cumsum(0)])
    q = _randn(len(shapes), q_heads, dim, gen=gen)
    return q, k_cache, v_cache, indptr, torch.cat(seqs), padded, lens


@pytest.mark.parametrize(("shapes", "q_heads", "kv_heads", "dim", "page", "cap"), [
    ([(300, 5), (300, 1), (300, 17)], 9, 3, 64, 1, 0.0),  # one group, every request
    ([(0, 70), (211, 3), (211, 9), (97, 2), (97, 40), (5, 13)], 6, 2, 33, 4, 0.0),  # 2 + loners
    ([(150, 1), (150, 2), (80, 30), (80, 7)], 4, 4, 17, 16, 5.0),  # logit cap
    ([(120, 4), (120, 9), (40, 2), (40, 1)], 5, 1, 128, 8, 2.0),  # 128: the AVX-512 suffixes
])
def test_decode_cascade_merges_native_suffixes_into_the_prefix(
        shapes: list[tuple[int, int]], q_heads: int, kv_heads: int, dim: int, page: int,
        cap: float, gen: torch.Generator, decode_kernel: str) -> None:
    q, k_cache, v_cache, indptr, indices, padded, lens = _cascade_case(
        shapes, q_heads, kv_heads, dim, page, gen)
    plan = plan_decode_padded(padded, lens, page, 0, {})
    assert plan.groups and plan.suffix_indices is not None, "the case must take the cascade"
    args = (q, k_cache, v_cache, indptr, indices, dim**-0.5, cap, 0)
    plain = plan_decode_padded(padded, lens, page, 0, None, cascade=False)
    want = decode_attention_ref(*args, plan=plain)
    torch.testing.assert_close(cpu_row_ops.decode_attention(*args, plan=plan), want,
                               rtol=RTOL, atol=ATOL)
    torch.testing.assert_close(decode_attention_ref(*args, plan=plan), want, rtol=RTOL,
                               atol=ATOL)


def test_the_planner_leaves_one_request_and_small_batches_to_the_native_kernel() -> None:
    limit = cpu_row_ops.NATIVE_DECODE_MAX_KV
    one = torch.arange(3 * limit)[None]
    assert cpu_row_ops.plan_decode(one, torch.tensor([3 * limit]), 1, 0, None) is None
    fits = torch.arange(limit).view(4, limit // 4)
    assert cpu_row_ops.plan_decode(fits, torch.full((4,), limit // 4), 1, 0, None) is None
    wide = torch.arange(limit + 4).view(4, limit // 4 + 1)
    lens = torch.tensor([limit // 4 + 1, 3, 3, 3])  # the longest pads every request
    assert cpu_row_ops.plan_decode(wide, lens, 1, 0, None) is not None


def test_a_decode_layers_calls_take_the_native_kernels(monkeypatch: pytest.MonkeyPatch,
                                                       gen: torch.Generator) -> None:
    """A decode step's own arguments (a Parameter weight, a fused-QKV view, int64 slots)
    reach the C kernels: a silent fallback to the references would lose the point."""
    for ref in ("rms_norm_ref", "fused_add_rms_norm_ref", "rotary_rows_ref", "store_kv_ref",
                "decode_attention_ref", "silu_mul_ref", "gelu_tanh_mul_ref"):
        monkeypatch.setattr(cpu_row_ops, ref, _refuse)
    weight = torch.nn.Parameter(_randn(64, gen=gen), requires_grad=False)
    x = _randn(1, 64, gen=gen)
    cpu_row_ops.rms_norm(x, weight, 1e-5)
    cpu_row_ops.fused_add_rms_norm(x, x.clone(), weight, 1e-5)
    qkv = _randn(1, 5 * 16, gen=gen)
    cos, sin = rotary_rows(torch.tensor([3]), _randn(8, 8, gen=gen), _randn(8, 8, gen=gen),
                           torch.float32)
    cpu_row_ops.rotary_rows(qkv[:, :4 * 16].view(1, 4, 16), cos, sin)
    cpu_row_ops.qk_norm_rotary(qkv[:, :4 * 16].view(1, 4, 16), 3, weight[:16], weight[16:32],
                               1e-5, cos, sin)
    cpu_row_ops.silu_mul(qkv)
    cpu_row_ops.gelu_tanh_mul(qkv)
    q, k_cache, v_cache, indptr, indices = _decode_case([9], 3, 1, 16, gen)
    cpu_row_ops.store_kv(k_cache, v_cache, indices[:1], q[:, :1], q[:, 1:2].contiguous())
    cpu_row_ops.decode_attention(q, k_cache, v_cache, indptr, indices, 0.25)


def _refuse(*args: object, **kwargs: object) -> None:
    raise AssertionError("fell back to the torch reference")


def test_other_cases_go_to_the_references(gen: torch.Generator) -> None:
    """bfloat16, strided, int32-indexed and planned calls give the references' results."""
    x, w = _randn(3, 40, gen=gen).bfloat16(), _randn(40, gen=gen).bfloat16()
    assert torch.equal(cpu_row_ops.rms_norm(x, w, 1e-5), rms_norm_ref(x, w, 1e-5))
    xs = _randn(40, 3, gen=gen).t()  # not contiguous
    assert torch.equal(cpu_row_ops.rms_norm(xs, w.float(), 1e-5), rms_norm_ref(xs, w.float(),
                                                                                 1e-5))
    q, k_cache, v_cache, indptr, indices = _decode_case([7, 2], 4, 2, 16, gen)
    args = (q, k_cache, v_cache, indptr.int(), indices.int(), 0.25)
    assert torch.equal(cpu_row_ops.decode_attention(*args), decode_attention_ref(*args))
    with pytest.raises(ValueError, match="weight: expected size 40"):
        cpu_row_ops.rms_norm(x.float(), _randn(41, gen=gen), 1e-5)


def test_model_on_native_kernels_matches_torch_kernels(tiny_model_path: Path) -> None:
    """Prefill logits and greedy continuations agree between the torch and native sets."""
    prompts = [[5, 17, 93, 4, 250, 31, 8, 77, 12], [44, 3], [9] * 21]
    logits, tokens = backends_side_by_side(tiny_model_path, ("torch", "native"), "cpu", 16,
                                           prompts)
    assert logits["torch"].std() > 0.01, "degenerate logits would make the check vacuous"
    torch.testing.assert_close(logits["native"], logits["torch"], atol=1e-4, rtol=0)
    assert tokens["native"] == tokens["torch"]
