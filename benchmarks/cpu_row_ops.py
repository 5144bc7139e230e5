"""The native per-token kernels against their torch references, side by side in one process:
each op at SmolLM2-135M's decode shapes (hidden 576, 9 query / 3 KV heads of 64, inter 1536),
and decode attention over batch x context (the torch side with its plan built beforehand, the
plan's own time reported apart: it is built once per forward, the attention runs per layer),
and the shared-prefix cascade of 32 questions over one 1,552-token document, both sets on
one plan.

Times are this thread's CPU time per call (medians of ``--repeats`` runs), so another process
holding the core is not counted; one torch thread:

    python benchmarks/cpu_row_ops.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import torch

from radixlm.kernels.cpu import row_ops as native
from radixlm.kernels.reference.decode_attention import decode_attention_ref, plan_decode_padded
from radixlm.kernels.reference.kv_store import store_kv_ref
from radixlm.kernels.reference.rms_norm import fused_add_rms_norm_ref
from radixlm.kernels.reference.rotary import rotary_rows, rotary_rows_ref
from radixlm.kernels.reference.silu_mul import silu_mul_ref

HIDDEN, HQ, HKV, D, INTER, PAGE = 576, 9, 3, 64, 1536, 16


def _us(fn: Callable[[], object], repeats: int, budget_s: float = 0.05) -> float:
    """Median over ``repeats`` runs of the CPU microseconds per call."""
    fn()
    start = time.thread_time()
    fn()
    calls = max(1, int(budget_s / max(time.thread_time() - start, 1e-7)))
    runs = []
    for _ in range(repeats):
        start = time.thread_time()
        for _ in range(calls):
            fn()
        runs.append((time.thread_time() - start) / calls * 1e6)
    return round(statistics.median(runs), 2)


def op_rows(repeats: int) -> dict[str, dict[str, float]]:
    """The per-layer ops at one token: {op: {"native_us", "torch_us"}}."""
    x, res, w = torch.randn(1, HIDDEN), torch.randn(1, HIDDEN), torch.randn(HIDDEN)
    qkv = torch.randn(1, (HQ + 2 * HKV) * D)
    qk = qkv[:, :(HQ + HKV) * D].view(1, HQ + HKV, D)
    cos, sin = rotary_rows(torch.tensor([7]), torch.randn(64, D // 2), torch.randn(64, D // 2),
                           torch.float32)
    pool_k, pool_v = torch.randn(64, PAGE, HKV, D), torch.randn(64, PAGE, HKV, D)
    k, v, slot = torch.randn(1, HKV, D), torch.randn(1, HKV, D), torch.tensor([5])
    gate_up = torch.randn(1, 2 * INTER)
    pairs = {
        "fused_add_rms_norm": (lambda: native.fused_add_rms_norm(x, res, w, 1e-5),
                               lambda: fused_add_rms_norm_ref(x, res, w, 1e-5)),
        "rotary_rows": (lambda: native.rotary_rows(qk, cos, sin),
                        lambda: rotary_rows_ref(qk, cos, sin)),
        "store_kv": (lambda: native.store_kv(pool_k, pool_v, slot, k, v),
                     lambda: store_kv_ref(pool_k, pool_v, slot, k, v)),
        "silu_mul": (lambda: native.silu_mul(gate_up), lambda: silu_mul_ref(gate_up)),
    }
    return {name: {"native_us": _us(a, repeats), "torch_us": _us(b, repeats)}
            for name, (a, b) in pairs.items()}


def attention_rows(repeats: int) -> list[dict[str, float]]:
    """Decode attention per (batch, context), distinct requests on consecutive pages."""
    pool_k, pool_v = torch.randn(2048, PAGE, HKV, D), torch.randn(2048, PAGE, HKV, D)
    return [_attention_row(pool_k, pool_v, batch, context, repeats)
            for batch, context in ((1, 16), (1, 128), (1, 512), (1, 2048), (4, 512), (8, 64),
                                   (8, 512), (32, 64))]


def _attention_row(pool_k: torch.Tensor, pool_v: torch.Tensor, batch: int, context: int,
                   repeats: int) -> dict[str, float]:
    table = torch.arange(batch * context).view(batch, context) + 7
    lens = torch.full((batch,), context)
    indptr, indices = torch.arange(batch + 1) * context, table.flatten()
    q = torch.randn(batch, HQ, D)
    plan = plan_decode_padded(table, lens, PAGE, 0, {})
    return {
        "batch": batch, "context": context,
        "native_us": _us(lambda: native.decode_attention(q, pool_k, pool_v, indptr, indices,
                                                         D**-0.5), repeats),
        "torch_us": _us(lambda: decode_attention_ref(q, pool_k, pool_v, indptr, indices,
                                                     D**-0.5, plan=plan), repeats),
        "torch_plan_us": _us(lambda: plan_decode_padded(table, lens, PAGE, 0, {}), repeats),
        "native_taken": native.plan_decode(table, lens, PAGE, 0, None) is None,
    }


def cascade_rows(repeats: int, doc: int = 1552, batch: int = 32) -> list[dict[str, float]]:
    """Decode attention of ``batch`` questions over one ``doc``-token document (shared pool
    slots, a cascade group) plus each one's own suffix: the torch cascade (flash prefix part,
    gathered padded suffixes by SDPA, merge) against the native set's (the same prefix part,
    the suffixes by the native kernel merged into it), on one plan built beforehand."""
    pool_k, pool_v = torch.randn(doc + batch * 64, 1, HKV, D), \
        torch.randn(doc + batch * 64, 1, HKV, D)
    q = torch.randn(batch, HQ, D)
    return [_cascade_row(pool_k, pool_v, q, doc, suffix, repeats) for suffix in (17, 48)]


def _cascade_row(pool_k: torch.Tensor, pool_v: torch.Tensor, q: torch.Tensor, doc: int,
                 suffix: int, repeats: int) -> dict[str, float]:
    batch = q.shape[0]
    table = torch.cat([torch.arange(doc).expand(batch, doc),
                       doc + 64 * torch.arange(batch)[:, None] + torch.arange(suffix)], 1)
    lens = torch.full((batch,), doc + suffix)
    indptr, indices = torch.arange(batch + 1) * (doc + suffix), table.flatten()
    plan = plan_decode_padded(table, lens, 1, 0, {})
    return {
        "cascade_batch": batch, "shared": doc, "suffix": suffix,
        "native_us": _us(lambda: native.decode_attention(q, pool_k, pool_v, indptr, indices,
                                                         D**-0.5, plan=plan), repeats),
        "torch_us": _us(lambda: decode_attention_ref(q, pool_k, pool_v, indptr, indices,
                                                     D**-0.5, plan=plan), repeats),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if not native.row_ops_available():
        raise SystemExit("radixlm.kernels.cpu.native.row_ops is not built: "
                         "python setup.py build_ext --inplace")
    torch.set_num_threads(1)
    print(json.dumps({"load_avg_1min": os.getloadavg()[0], "ops": op_rows(args.repeats)}))
    for row in attention_rows(args.repeats) + cascade_rows(args.repeats):
        print(json.dumps(row))
    print(json.dumps({"load_avg_1min_after": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
