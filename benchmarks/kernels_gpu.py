"""Check every Triton kernel against its torch reference and time it on a CUDA GPU.

    python benchmarks/kernels_gpu.py                  # CUDA: check + time, print a table
    python benchmarks/kernels_gpu.py --small          # the same on smaller shapes
    python benchmarks/kernels_gpu.py --interpret      # no GPU: checks only, Triton's CPU
                                                      # interpreter, small shapes
    python benchmarks/kernels_gpu.py --compile-only 90  # no GPU: compile every launch for
                                                      # sm_90 (ptxas), report shared memory

Each row: the largest relative error against the reference run in float32 on the same inputs;
the Triton kernel's time (``triton.testing.do_bench``, mean ms, L2 flushed between runs); the
physical limit, i.e. the bytes the kernel must move over the device-to-device copy bandwidth
measured at start (and, for attention, the TFLOP/s reached); and the same op in the torch
reference path, in ``torch.nn.functional.scaled_dot_product_attention`` over KV gathered
beforehand (its time leaves the gather out), and in FlashInfer when it is installed.
Exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import torch
import torch.nn.functional as F
from kernels_gpu_compile import compile_only
from kernels_gpu_peers import dense_kv, flashinfer_decode, flashinfer_extend, sdpa_extend

TOL = {torch.float32: 1e-3, torch.float16: 5e-3, torch.bfloat16: 3e-2}
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


@dataclass
class Case:
    """One kernel on one shape: how to run it, check it and count what it must move."""

    kernel: str
    shape: str
    run: Callable[[], object]  # the Triton launch (outputs preallocated)
    check: Callable[[], float]  # runs it once more, returns the relative error
    tol: float
    bytes: int  # bytes the op must read and write at least
    flops: int = 0
    # name -> the same op another way, or why it could not run
    baselines: dict[str, Callable[[], object] | str] = field(default_factory=dict)


@dataclass
class Row:
    """A measured case (numbers only: the case's tensors are freed before the next one)."""

    kernel: str
    shape: str
    dtype: str
    err: float
    tol: float
    bytes: int
    flops: int
    ms: float | None = None
    others: dict[str, float | str] = field(default_factory=dict)


def rel_err(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """Max |a - e| / max |e|; inf if the kernel left anything unwritten (NaN poison)."""
    if not torch.isfinite(actual).all():
        return float("inf")
    scale = expected.double().abs().max().clamp_min(1e-30)
    return ((actual.double() - expected.double()).abs().max() / scale).item()


def nbytes(*tensors: torch.Tensor) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def paged_pools(lens: list[int], heads: int, head_dim: int, page_size: int,
                dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Pools [pages, page_size, H, D] with each request's pages scattered at random.

    Returns k_cache, v_cache, kv_indptr, kv_indices (slots, int32) and page_indptr,
    page_indices, last_page_len (FlashInfer's page table for the same layout).
    """
    pages = [-(-n // page_size) for n in lens]
    num_pages = sum(pages) + 1
    shape = (num_pages, page_size, heads, head_dim)
    k_cache = torch.randn(shape, device=device).to(dtype)
    v_cache = torch.randn(shape, device=device).to(dtype)
    order = torch.randperm(num_pages, device=device)
    page_ids = order[: sum(pages)].split(pages)
    offsets = torch.arange(page_size, device=device)
    slots = [(p[:, None] * page_size + offsets).flatten()[:n] for p, n in zip(page_ids, lens)]
    indptr = torch.tensor([0, *torch.tensor(lens).cumsum(0).tolist()], device=device)
    page_indptr = torch.tensor([0, *torch.tensor(pages).cumsum(0).tolist()], device=device)
    last = torch.tensor([(n - 1) % page_size + 1 for n in lens], device=device)
    return (k_cache, v_cache, indptr.int(), torch.cat(slots).int(), page_indptr.int(),
            torch.cat(page_ids).int(), last.int())


def decode_case(batch: int, ctx: int, hq: int, hkv: int, head_dim: int, page_size: int,
                dtype: torch.dtype, device: torch.device, splits: int | None = None,
                logit_cap: float = 0.0) -> Case:
    from radixlm.kernels import decode_attention_ref, plan_decode
    from radixlm.kernels.triton.decode_attention import decode_attention_triton

    lens = torch.randint(max(ctx // 2, 1), ctx + 1, (batch,)).tolist()
    pools = paged_pools(lens, hkv, head_dim, page_size, dtype, device)
    k_cache, v_cache, indptr, indices = pools[:4]
    q = torch.randn(batch, hq, head_dim, device=device).to(dtype)
    out = torch.full_like(q, float("nan"))
    scale = head_dim**-0.5

    def run() -> object:
        return decode_attention_triton(q, k_cache, v_cache, indptr, indices, scale, logit_cap,
                                       out=out, num_kv_splits=splits)

    def check() -> float:
        out.fill_(float("nan"))
        run()
        ref = decode_attention_ref(q.float(), k_cache.float(), v_cache.float(), indptr,
                                   indices, scale, logit_cap)
        return rel_err(out, ref)

    plan = plan_decode(indptr, indices, 0, page_size)
    baselines: dict[str, Callable[[], object] | str] = {
        "torch ref": lambda: decode_attention_ref(q, k_cache, v_cache, indptr, indices, scale,
                                                  logit_cap, plan=plan),
    }
    if logit_cap == 0 and device.type == "cuda":
        k_dense, valid = dense_kv(k_cache, indptr, indices)
        v_dense, _ = dense_kv(v_cache, indptr, indices)
        mask = valid[:, None, None, :]
        baselines["SDPA"] = lambda: F.scaled_dot_product_attention(
            q[:, :, None], k_dense, v_dense, attn_mask=mask, scale=scale, enable_gqa=True)
        baselines["FlashInfer"] = flashinfer_decode(q, k_cache, v_cache, pools)
    total = sum(lens)
    return Case(
        "decode_attention",
        f"B{batch} ctx~{ctx} {hq}/{hkv}x{head_dim} ps{page_size}"
        + (f" cap{logit_cap:g}" if logit_cap else "") + (f" s{splits}" if splits else ""),
        run, check, TOL[dtype],
        bytes=2 * total * hkv * head_dim * k_cache.element_size() + nbytes(q, out, indices),
        flops=4 * total * hq * head_dim, baselines=baselines,
    )


def extend_case(batch: int, prefix: int, new: int, hq: int, hkv: int, head_dim: int,
                page_size: int, dtype: torch.dtype, device: torch.device,
                sliding_window: int = 0) -> Case:
    from radixlm.kernels import extend_attention_ref
    from radixlm.kernels.triton.extend_attention import extend_attention_triton

    news = torch.randint(max(new // 2, 1), new + 1, (batch,)).tolist()
    prefixes = torch.randint(0, prefix + 1, (batch,)).tolist()
    lens = [p + n for p, n in zip(prefixes, news)]
    pools = paged_pools(lens, hkv, head_dim, page_size, dtype, device)
    k_cache, v_cache, kv_indptr, kv_indices = pools[:4]
    qo_indptr = torch.tensor([0, *torch.tensor(news).cumsum(0).tolist()], device=device).int()
    q = torch.randn(sum(news), hq, head_dim, device=device).to(dtype)
    out = torch.full_like(q, float("nan"))
    scale = head_dim**-0.5

    def run() -> object:
        return extend_attention_triton(q, k_cache, v_cache, qo_indptr, kv_indptr, kv_indices,
                                       scale, 0.0, sliding_window, out=out)

    def check() -> float:
        out.fill_(float("nan"))
        run()
        ref = extend_attention_ref(q.float(), k_cache.float(), v_cache.float(), qo_indptr,
                                   kv_indptr, kv_indices, scale, 0.0, sliding_window)
        return rel_err(out, ref)

    baselines: dict[str, Callable[[], object] | str] = {
        "torch ref": lambda: extend_attention_ref(q, k_cache, v_cache, qo_indptr, kv_indptr,
                                                  kv_indices, scale, 0.0, sliding_window),
    }
    if device.type == "cuda" and sliding_window == 0:
        baselines["SDPA"] = sdpa_extend(q, qo_indptr, k_cache, v_cache, kv_indptr, kv_indices,
                                        news, prefixes, scale)
        baselines["FlashInfer"] = flashinfer_extend(q, qo_indptr, k_cache, v_cache, pools)
    pairs = sum(n * p + n * (n + 1) // 2 for n, p in zip(news, prefixes))  # (query, key) seen
    return Case(
        "extend_attention",
        f"B{batch} prefix<={prefix} new~{new} {hq}/{hkv}x{head_dim} ps{page_size}"
        + (f" win{sliding_window}" if sliding_window else ""),
        run, check, TOL[dtype],
        bytes=2 * sum(lens) * hkv * head_dim * k_cache.element_size()
        + nbytes(q, out, kv_indices),
        flops=4 * pairs * hq * head_dim, baselines=baselines,
    )


def store_kv_case(tokens: int, hkv: int, head_dim: int, page_size: int, dtype: torch.dtype,
                  device: torch.device) -> Case:
    from radixlm.kernels import store_kv_ref
    from radixlm.kernels.triton.kv_store import store_kv_triton

    num_pages = -(-tokens // page_size) + 8
    shape = (num_pages, page_size, hkv, head_dim)
    k_cache = torch.full(shape, float("nan"), device=device).to(dtype)
    v_cache = torch.full(shape, float("nan"), device=device).to(dtype)
    slots = torch.randperm(num_pages * page_size, device=device)[:tokens]
    k = torch.randn(tokens, hkv, head_dim, device=device).to(dtype)
    v = torch.randn(tokens, hkv, head_dim, device=device).to(dtype)

    def check() -> float:
        store_kv_triton(k_cache, v_cache, slots, k, v)
        flat = k_cache.view(-1, hkv, head_dim)
        return max(rel_err(flat[slots], k), rel_err(v_cache.view(-1, hkv, head_dim)[slots], v))

    return Case(
        "store_kv", f"T{tokens} {hkv}x{head_dim} ps{page_size}",
        lambda: store_kv_triton(k_cache, v_cache, slots, k, v), check, 0.0,
        bytes=2 * nbytes(k, v) + nbytes(slots),
        baselines={"torch ref": lambda: store_kv_ref(k_cache, v_cache, slots, k, v)},
    )


def rms_norm_case(tokens: int, hidden: int, fused: bool, dtype: torch.dtype,
                  device: torch.device) -> Case:
    from radixlm.kernels import fused_add_rms_norm_ref, rms_norm_ref
    from radixlm.kernels.triton.rms_norm import fused_add_rms_norm_triton, rms_norm_triton

    x = torch.randn(tokens, hidden, device=device).to(dtype)
    residual = torch.randn(tokens, hidden, device=device).to(dtype)
    weight = (1 + 0.1 * torch.randn(hidden, device=device)).to(dtype)
    out, summed = torch.empty_like(x), torch.empty_like(x)
    eps = 1e-6
    if fused:
        def run() -> object:
            return fused_add_rms_norm_triton(x, residual, weight, eps, out=out,
                                             residual_out=summed)

        def ref() -> torch.Tensor:
            return fused_add_rms_norm_ref(x, residual, weight, eps)[0]

        moved = nbytes(x, residual, out, summed, weight)
    else:
        def run() -> object:
            return rms_norm_triton(x, weight, eps, out=out)

        def ref() -> torch.Tensor:
            return rms_norm_ref(x, weight, eps)

        moved = nbytes(x, out, weight)

    def check() -> float:
        out.fill_(float("nan"))
        run()
        return rel_err(out, ref())

    return Case("fused_add_rms_norm" if fused else "rms_norm", f"T{tokens} h{hidden}", run,
                check, TOL[dtype], bytes=moved, baselines={"torch ref": ref})


def rotary_case(tokens: int, hq: int, hk: int, head_dim: int, dtype: torch.dtype,
                device: torch.device) -> Case:
    from radixlm.kernels import rotary_ref
    from radixlm.kernels.triton.rotary import rotary_triton

    max_pos = 8192
    inv_freq = 1.0 / 10000.0 ** (torch.arange(0, head_dim, 2, device=device) / head_dim)
    freqs = torch.arange(max_pos, device=device)[:, None] * inv_freq
    cos, sin = freqs.cos(), freqs.sin()
    qkv = torch.randn(tokens, (hq + 2 * hk) * head_dim, device=device).to(dtype)
    q = qkv[:, : hq * head_dim].view(tokens, hq, head_dim)  # strided views, as in the model
    k = qkv[:, hq * head_dim : (hq + hk) * head_dim].view(tokens, hk, head_dim)
    positions = torch.randint(0, max_pos, (tokens,), device=device)
    q_out, k_out = torch.empty_like(q), torch.empty_like(k)

    def run() -> object:
        return rotary_triton(q, k, positions, cos, sin, q_out=q_out, k_out=k_out)

    def check() -> float:
        q_out.fill_(float("nan"))
        k_out.fill_(float("nan"))
        run()
        q_ref, k_ref = rotary_ref(q.float(), k.float(), positions, cos, sin)
        return max(rel_err(q_out, q_ref), rel_err(k_out, k_ref))

    return Case(
        "rotary", f"T{tokens} {hq}/{hk}x{head_dim}", run, check, TOL[dtype],
        bytes=2 * nbytes(q_out, k_out) + 2 * tokens * (head_dim // 2) * 4 + nbytes(positions),
        baselines={"torch ref": lambda: rotary_ref(q, k, positions, cos, sin)},
    )


def bitmask_case(rows: int, vocab: int, dtype: torch.dtype, device: torch.device,
                 some_rows: bool = False) -> Case:
    from radixlm.kernels import apply_token_bitmask_ref
    from radixlm.kernels.triton.token_bitmask import apply_token_bitmask_triton

    logits = torch.randn(rows, vocab, device=device).to(dtype)
    words = (vocab + 31) // 32
    # Masks for every row, or (some_rows) for every other row, in reverse order.
    targets = torch.arange(rows, device=device).flip(0)[::2].contiguous() if some_rows else None
    num_masks = rows if targets is None else targets.shape[0]
    bitmask = torch.randint(-(2**31), 2**31, (num_masks, words), device=device,
                            dtype=torch.int64).to(torch.int32)
    work = logits.clone()

    def check() -> float:
        work.copy_(logits)
        apply_token_bitmask_triton(work, bitmask, targets)
        expected = logits.clone()
        apply_token_bitmask_ref(expected, bitmask, targets)
        return 0.0 if torch.equal(work, expected) else float("inf")

    disallowed = num_masks * vocab // 2  # random bits: about half the logits become -inf
    return Case(
        "apply_token_bitmask", f"R{num_masks}/{rows} V{vocab}",
        lambda: apply_token_bitmask_triton(work, bitmask, targets), check, 0.0,
        bytes=nbytes(bitmask) + disallowed * logits.element_size(),
        baselines={"torch ref": lambda: apply_token_bitmask_ref(work, bitmask, targets)},
    )


def build_cases(small: bool, dtype: torch.dtype,
                device: torch.device) -> list[Callable[[], Case]]:
    """Llama-3-8B-like shapes (32 query / 8 KV heads of 128, hidden 4096, vocab 128256).

    Factories, so that one case's tensors are alive at a time.
    """
    if small:
        return [
            partial(decode_case, 4, 100, 8, 2, 128, 16, dtype, device, splits=1),
            partial(decode_case, 3, 70, 8, 1, 64, 1, dtype, device, splits=3, logit_cap=30.0),
            partial(extend_case, 3, 40, 50, 4, 2, 128, 16, dtype, device),
            partial(extend_case, 2, 30, 70, 4, 1, 64, 1, dtype, device, sliding_window=16),
            partial(decode_case, 2, 40, 4, 2, 256, 16, dtype, device, splits=2),
            partial(extend_case, 2, 20, 40, 4, 2, 256, 1, dtype, device),
            partial(store_kv_case, 37, 2, 128, 16, dtype, device),
            partial(rms_norm_case, 7, 1000, False, dtype, device),
            partial(rms_norm_case, 7, 1000, True, dtype, device),
            partial(rms_norm_case, 3, 4096, True, dtype, device),  # Llama-3-8B's hidden size
            partial(rotary_case, 9, 8, 2, 128, dtype, device),
            partial(rotary_case, 3, 32, 8, 128, dtype, device),
            partial(bitmask_case, 3, 2049, dtype, device),
            partial(bitmask_case, 5, 1000, dtype, device, some_rows=True),
        ]
    return [
        partial(decode_case, 1, 32768, 32, 8, 128, 16, dtype, device),
        partial(decode_case, 32, 4096, 32, 8, 128, 16, dtype, device),
        partial(decode_case, 128, 2048, 32, 8, 128, 16, dtype, device),
        partial(decode_case, 128, 2048, 32, 8, 128, 1, dtype, device),
        partial(decode_case, 64, 1024, 16, 16, 64, 16, dtype, device, logit_cap=30.0),
        partial(extend_case, 1, 0, 4096, 32, 8, 128, 16, dtype, device),
        partial(extend_case, 8, 2048, 512, 32, 8, 128, 16, dtype, device),
        partial(extend_case, 32, 1024, 64, 32, 8, 128, 16, dtype, device),
        partial(extend_case, 8, 2048, 512, 32, 8, 128, 16, dtype, device, sliding_window=256),
        partial(store_kv_case, 8192, 8, 128, 16, dtype, device),
        partial(rms_norm_case, 8192, 4096, False, dtype, device),
        partial(rms_norm_case, 8192, 4096, True, dtype, device),
        partial(rotary_case, 8192, 32, 8, 128, dtype, device),
        partial(bitmask_case, 64, 128256, dtype, device),
    ]


# --------------------------------------------------------------------------- modes


def copy_bandwidth(device: torch.device) -> float:
    """Device-to-device copy rate in bytes/s (read + write), on 1 GiB."""
    from triton.testing import do_bench

    src = torch.empty(1 << 30, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    ms = do_bench(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3)


def measure(case: Case, dtype: str, timed: bool) -> Row:
    row = Row(case.kernel, case.shape, dtype, case.check(), case.tol, case.bytes, case.flops)
    if not timed:
        return row
    from triton.testing import do_bench

    row.ms = do_bench(case.run)
    for name, fn in case.baselines.items():
        row.others[name] = fn if isinstance(fn, str) else do_bench(fn)
    return row


def fmt(value: float | str | None, spec: str = ".3f") -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else format(value, spec)


def print_table(rows: list[Row], bandwidth: float | None) -> None:
    cols = ["kernel", "shape", "dtype", "rel err", "ok", "triton ms", "limit ms", "% limit",
            "TFLOP/s", "torch ref ms", "SDPA ms", "FlashInfer ms"]
    lines = []
    for r in rows:
        limit = r.bytes / bandwidth * 1e3 if bandwidth else None
        lines.append([
            r.kernel, r.shape, r.dtype, f"{r.err:.1e}", "ok" if r.err <= r.tol else "FAIL",
            fmt(r.ms), fmt(limit),
            fmt(100 * limit / r.ms, ".0f") if limit and r.ms else "-",
            fmt(r.flops / (r.ms * 1e-3) / 1e12, ".1f") if r.flops and r.ms else "-",
            *(fmt(r.others.get(name)) for name in ("torch ref", "SDPA", "FlashInfer")),
        ])
    widths = [max(len(x) for x in col) for col in zip(cols, *lines)]
    for line in [cols, ["-" * w for w in widths], *lines]:
        print("  ".join(x.ljust(w) for x, w in zip(line, widths)).rstrip())


def run_checks(args: argparse.Namespace, device: torch.device) -> int:
    """Check (and on CUDA time) every case; returns the exit status."""
    timed = device.type == "cuda"
    torch.manual_seed(0)
    bandwidth = copy_bandwidth(device) if timed else None
    rows = []
    for dtype_name in args.dtypes:
        for make in build_cases(args.small or not timed, DTYPES[dtype_name], device):
            rows.append(measure(make(), dtype_name, timed))
            print(f"  {rows[-1].kernel} {rows[-1].shape} {dtype_name}: "
                  f"rel err {rows[-1].err:.1e}", file=sys.stderr)
    import triton

    where = torch.cuda.get_device_name(device) if timed else "CPU (Triton interpreter)"
    print(f"# {datetime.date.today()}  {where}  torch {torch.__version__}  "
          f"triton {triton.__version__}  dtypes {','.join(args.dtypes)}")
    if bandwidth:
        print(f"# copy bandwidth {bandwidth / 1e9:.0f} GB/s (limit = bytes moved / this)")
    print_table(rows, bandwidth)
    failed = [r for r in rows if not r.err <= r.tol]
    if failed:
        print(f"{len(failed)} check(s) FAILED", file=sys.stderr)
    return 1 if failed else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="small shapes")
    parser.add_argument("--interpret", action="store_true",
                        help="no GPU: run the checks in Triton's CPU interpreter (small shapes)")
    parser.add_argument("--compile-only", type=int, metavar="SM",
                        help="no GPU: compile every kernel for compute capability SM (e.g. 90)")
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=None,
                        help="activation dtypes (default: bf16 on CUDA, fp32 otherwise)")
    args = parser.parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # before any kernel module is imported
    torch.set_num_threads(1)
    if args.compile_only:
        args.dtypes = args.dtypes or ["bf16", "fp32"]
        return compile_only(args.compile_only, args.dtypes, lambda dtype: build_cases(
            True, DTYPES[dtype], torch.device("cpu")))
    if args.interpret:
        args.dtypes = args.dtypes or ["fp32", "bf16"]
        return run_checks(args, torch.device("cpu"))
    if not torch.cuda.is_available():
        print("kernels_gpu.py needs a CUDA GPU (torch.cuda.is_available() is False). "
              "Without one: --interpret checks the kernels in Triton's CPU interpreter, "
              "--compile-only 90 compiles them for sm_90.", file=sys.stderr)
        return 2
    args.dtypes = args.dtypes or ["bf16"]
    return run_checks(args, torch.device("cuda"))


if __name__ == "__main__":
    sys.exit(main())
