"""Builds of a native quantized GEMV side by side: which source (or prefetch) streams faster?

Compiles ``src/radixlm/kernels/cpu/native/<kernel>.c`` as it is at each given git revision (or in
the working tree: ``tree``), optionally with ``-D`` flags, with setup.py's flags into a temp
folder, loads every build in this one process and times a pass over weights of SmolLM2-135M's
210 linear shapes in model order (7 per layer, 30 layers; random codes: the values do not
matter to the speed) on each build, the builds (and for int8 the prefetch distances) taking
turns round by round, the order reversed every other round. Per row count: the lower quartile
and the best pass (thread CPU time) and the GB/s of codes (and scales) streamed. Also checks
that every build gives the first one's numbers (``same_as_first``). One thread::

    python benchmarks/cpu_quant_gemv_builds.py --kernel int8 --builds old=main,new=tree \\
        --prefetch 8192,24576 --rows 1,2,8 --rounds 151
    python benchmarks/cpu_quant_gemv_builds.py --kernel q4_gemv --bits 4 \\
        --builds old=main,new=tree --rows 1,2,8
    # per-channel int8 on q4_gemv's rows layout (int8-vnni)
    python benchmarks/cpu_quant_gemv_builds.py --kernel q4_gemv --layout rows \\
        --builds 'pf8k=tree:-DPREFETCH_BYTES=8192,pf12k=tree' --rows 1,2,8
    # a -D flag: --builds 'pf16k=tree:-DPREFETCH_BYTES=16384'
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sysconfig
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import torch

from radixlm.kernels.cpu.int8_vnni import Int8VnniWeight
from radixlm.kernels.cpu.q4_gemv import GroupedGemvWeight, PackArena
from radixlm.kernels.cpu.quant_linear import Int8Weight

ROOT = Path(__file__).resolve().parent.parent
NATIVE = "src/radixlm/kernels/cpu/native"
OLD_NATIVE = "src/radixlm/kernels/native"  # before the backend packages
HEADER = "radixlm_native.h"
# (N, K) of one SmolLM2-135M layer: q, k, v, o, gate, up, down
LAYER = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)]
SHAPES = LAYER * 30


def source_text(rev: str, name: str) -> str | None:
    """``name`` in the native sources' folder at git revision ``rev`` (``tree``: the working
    tree), found where it is now or where it was before kernels/ was split by backend; None
    where the revision has no such file."""
    if rev == "tree":
        path = ROOT / NATIVE / name
        return path.read_text() if path.exists() else None
    for folder in (NATIVE, OLD_NATIVE):
        shown = subprocess.run(["git", "show", f"{rev}:{folder}/{name}"], cwd=ROOT,
                               capture_output=True, text=True)
        if shown.returncode == 0:
            return shown.stdout
    return None


def build(kernel: str, spec: str, folder: Path) -> ModuleType:
    """``spec`` = ``REV[:-DFLAG=V ...]`` (REV a git revision or ``tree``): the compiled module."""
    rev, _, flags = spec.partition(":")
    source = folder / f"{kernel}.c"
    text = source_text(rev, source.name)
    if text is None:
        raise SystemExit(f"no {source.name} at {rev}")
    source.write_text(text)
    header = source_text(rev, HEADER)  # the shared header, where the revision has one
    if header is not None:
        (folder / HEADER).write_text(header)
    target = folder / f"{kernel}{sysconfig.get_config_var('EXT_SUFFIX')}"
    cc = (sysconfig.get_config_var("CC") or "cc").split()
    subprocess.run([*cc, "-DNDEBUG", "-fwrapv", "-O3", "-std=c11", "-Wall", "-fPIC", "-shared",
                    f"-I{sysconfig.get_paths()['include']}", *flags.split(), str(source), "-o",
                    str(target)], check=True)
    spec_ = importlib.util.spec_from_file_location(kernel, target)
    assert spec_ is not None and spec_.loader is not None
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


def int8_passes(modules: dict[str, ModuleType], prefetches: list[int], rows: int,
                outs: list[torch.Tensor]) -> tuple[dict[str, Callable[[], None]], int]:
    weights = [(torch.randint(-128, 128, (n, k), dtype=torch.int8), torch.rand(n) + 0.01)
               for n, k in SHAPES]
    xs = {k: torch.randn(rows, k) for _, k in LAYER}

    def one(module: ModuleType, prefetch: int) -> Callable[[], None]:
        def run() -> None:
            for (n, k), (codes, scales), out in zip(SHAPES, weights, outs):
                module.gemv(xs[k].data_ptr(), codes.data_ptr(), scales.data_ptr(),
                            out.data_ptr(), rows, n, k, prefetch)
        return run
    passes = {f"{name}@{p}": one(m, p) for name, m in modules.items() for p in prefetches}
    return passes, sum(n * k for n, k in SHAPES)


def q4_passes(modules: dict[str, ModuleType], bits: int, layout: str, rows: int,
              outs: list[torch.Tensor]) -> tuple[dict[str, Callable[[], None]], int]:
    """Grouped int4/int8 (``bits``) or, for ``layout`` rows, per-channel int8 weights."""
    arena = PackArena()  # packed by this tree's module: the layout is the same in every build

    def scales(n: int, k: int) -> torch.Tensor:  # exact in float16, as GGUF's are
        return (torch.rand(n, k // 32) + 0.01).half().float()

    def codes8(n: int, k: int) -> torch.Tensor:
        return torch.randint(-128, 128, (n, k), dtype=torch.int8)
    if layout == "rows":
        weights = [Int8VnniWeight.pack(Int8Weight(codes8(n, k), torch.rand(n) + 0.01), arena)
                   for n, k in SHAPES]
        kinds = [(8, False, True)] * len(weights)
    else:
        weights = [GroupedGemvWeight.pack_int4(torch.randint(0, 16, (n, k), dtype=torch.uint8),
                                               scales(n, k), -scales(n, k), arena) if bits == 4
                   else GroupedGemvWeight.pack_int8(codes8(n, k), scales(n, k), arena)
                   for n, k in SHAPES]
        kinds = [(w.bits, w.half, False) for w in weights]
    xs = {k: torch.randn(rows, k) for _, k in LAYER}

    def one(module: ModuleType) -> Callable[[], None]:
        def run() -> None:
            for w, (b, half, per_row), out in zip(weights, kinds, outs):
                module.gemv(w.packed.data_ptr(), w.n, w.k, b, half, xs[w.k].data_ptr(), rows,
                            out.data_ptr(), per_row)
        return run
    return {name: one(m) for name, m in modules.items()}, sum(w.nbytes for w in weights)


def race(passes: dict[str, Callable[[], None]], outs: list[torch.Tensor], nbytes: int,
         rounds: int) -> dict[str, dict]:
    first: list[torch.Tensor] | None = None
    same: dict[str, bool] = {}
    for name, run in passes.items():
        run()
        got = [o.clone() for o in outs]
        first = first or got
        same[name] = all(torch.equal(a, b) for a, b in zip(first, got))
    spent: dict[str, list[float]] = {name: [] for name in passes}
    order = list(passes)
    for r in range(rounds):
        for name in order if r % 2 == 0 else order[::-1]:
            start = time.thread_time()
            passes[name]()
            spent[name].append(time.thread_time() - start)
    out = {}
    for name, times in spent.items():
        p25, best = statistics.quantiles(times, n=4)[0], min(times)
        out[name] = {"p25_ms": round(1000 * p25, 3), "best_ms": round(1000 * best, 3),
                     "p25_gb_s": round(nbytes / p25 / 1e9, 2),
                     "best_gb_s": round(nbytes / best / 1e9, 2), "same_as_first": same[name]}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", choices=["int8_gemv", "q4_gemv"], default="int8_gemv")
    parser.add_argument("--builds", default="old=main,new=tree",
                        help="NAME=REV[:-DFLAG=V ...], comma-separated (REV: git rev or tree)")
    parser.add_argument("--prefetch", default="24576",
                        help="int8_gemv: bytes ahead along each row, e.g. 8192,24576")
    parser.add_argument("--bits", type=int, choices=[4, 8], default=4, help="q4_gemv: 4 or 8")
    parser.add_argument("--layout", choices=["grouped", "rows"], default="grouped",
                        help="q4_gemv: grouped scales (--bits) or int8 with one scale per row")
    parser.add_argument("--rows", default="1,2,8")
    parser.add_argument("--rounds", type=int, default=151)
    args = parser.parse_args()
    torch.set_num_threads(1)
    result: dict[str, object] = {"load_avg_1min_before": os.getloadavg()[0], "kernel": args.kernel}
    with tempfile.TemporaryDirectory() as tmp:
        modules = {}
        for item in args.builds.split(","):
            name, spec = item.split("=", 1)
            (Path(tmp) / name).mkdir()
            modules[name] = build(args.kernel, spec, Path(tmp) / name)
        for rows in (int(r) for r in args.rows.split(",")):
            outs = [torch.empty(rows, n) for n, _ in SHAPES]
            if args.kernel == "int8_gemv":
                passes, nbytes = int8_passes(modules, [int(p) for p in args.prefetch.split(",")],
                                             rows, outs)
            else:
                passes, nbytes = q4_passes(modules, args.bits, args.layout, rows, outs)
            result[f"rows_{rows}"] = race(passes, outs, nbytes, args.rounds)
    result["bytes_per_pass"] = nbytes
    result["load_avg_1min_after"] = os.getloadavg()[0]
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
