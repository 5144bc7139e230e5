"""What R activation rows in one call cost against one row, on raw GGUF blocks.

A speculative verify runs 2-9 rows through every linear where a decode step runs one; on a
CPU at batch 1 the weight stream dominates, so R rows in one call should cost little more than
one. Per SmolLM2 matrix (its fused q|k|v and gate|up, o, down; the Q8_0 LM head; with
``--shapes gemma_...`` Gemma 3 270M's, whose o and down inputs take K-quants), per
type (``--types``; random blocks, the values do not matter to the speed) and R in ``--rows``:
the median thread CPU time (one thread; CPU time, so other processes on a shared core do not
count) of one R-row call over that of a 1-row call, the two taking turns, so the ratio is
what to compare on a shared machine. ``--cold``: each call on the next of enough copies of
the matrix to pass 128 MiB (the weights from memory, as in a model's step; else from cache).
With ``--baseline PATH`` (another build of ``gguf_blocks``' .so, e.g. main's) the same calls
on that build are timed in the same turns, its ratios printed beside, and each R's time here
over the baseline's (``x_baseline``).

    OMP_WAIT_POLICY=PASSIVE python benchmarks/gguf_few_rows.py --types Q4_1,Q8_0
    python benchmarks/gguf_few_rows.py --baseline /work/main/src/radixlm/kernels/cpu/native/\
gguf_blocks.cpython-311-x86_64-linux-gnu.so
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import statistics
import time
from types import ModuleType

import torch

from radixlm.kernels.cpu import gguf_blocks
from radixlm.kernels.reference.gguf_blocks import GGUF_BLOCKS, random_gguf_raw

# SmolLM2-135M's matrices (rows x cols): q|k|v, gate|up, o, down, the LM head
SMOLLM2 = {"qkv": (960, 576), "gate_up": (3072, 576), "o": (576, 576), "down": (576, 1536),
           "head": (49152, 576)}
# Gemma 3 270M's: q|k|v and gate|up (640 inputs: 32-weight types), o and down (K-quants too)
GEMMA = {"gemma_qkv": (1536, 640), "gemma_gate_up": (4096, 640), "gemma_o": (640, 1024),
         "gemma_down": (640, 2048)}
SHAPES = {**SMOLLM2, **GEMMA}


def load_build(path: str) -> ModuleType:
    """Another build of the ``gguf_blocks`` module, loaded beside the installed one."""
    name = "radixlm.kernels.cpu.native.gguf_blocks"
    loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def copies(raw: torch.Tensor, cold: bool) -> list[torch.Tensor]:
    """raw, or with ``cold`` enough copies of it to pass 128 MiB (no cache holds them all)."""
    count = -(-(128 << 20) // raw.numel()) if cold else 1
    return [raw.clone() for _ in range(count)]


def call_cost(lib: ModuleType, raw: torch.Tensor, type_id: int, cols: int,
              x: torch.Tensor, y: torch.Tensor) -> float:
    """One ``gemm`` call's thread CPU seconds (x's rows, the tiles' order)."""
    start = time.thread_time()
    lib.gemm(raw.data_ptr(), raw.stride(0), raw.shape[0], cols, type_id, x.data_ptr(),
             x.shape[0], y.data_ptr(), True, True)
    return time.thread_time() - start


def measure(libs: dict[str, ModuleType], type_name: str, rows: int, cols: int,
            counts: list[int], reps: int, cold: bool) -> dict:
    """Per build and R: median R-row and 1-row call times (ms) and their ratio."""
    gen = torch.Generator().manual_seed(rows + cols)
    raws = copies(random_gguf_raw(type_name, rows, cols, gen), cold)
    type_id = gguf_blocks._TYPE_IDS[type_name]
    xs = {r: torch.randn(r, cols, generator=gen) for r in counts}
    ys = {r: torch.empty(r, rows) for r in counts}
    times = {(b, r): [] for b in libs for r in counts}
    calls = 0
    for _ in range(reps + 1):  # the first round warms
        for b, lib in libs.items():
            for r in counts:
                raw = raws[calls % len(raws)]
                calls += 1
                times[b, r].append(call_cost(lib, raw, type_id, cols, xs[r], ys[r]))
    out = {}
    for b in libs:
        one = statistics.median(times[b, 1][1:])
        out[b] = {r: {"ms": round(1e3 * statistics.median(times[b, r][1:]), 3),
                      "x_one_row": round(statistics.median(times[b, r][1:]) / one, 2)}
                  for r in counts}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--types", default="Q4_1,Q8_0")
    ap.add_argument("--rows", default="1,2,3,4,6,8")
    ap.add_argument("--shapes", default=",".join(SMOLLM2), help=f"of {', '.join(SHAPES)}")
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--cold", action="store_true", help="weights from memory, not cache")
    ap.add_argument("--baseline", default="", help="another build's gguf_blocks .so")
    args = ap.parse_args()
    torch.set_num_threads(1)
    counts = sorted({1, *map(int, args.rows.split(","))})
    libs = {"this": gguf_blocks._lib}
    if args.baseline:
        libs["baseline"] = load_build(args.baseline)
    for type_name in args.types.split(","):
        elems = GGUF_BLOCKS[type_name].elems
        for shape in args.shapes.split(","):
            rows, cols = SHAPES[shape]
            if cols % elems or (shape == "head" and type_name != "Q8_0"):
                continue
            got = measure(libs, type_name, rows, cols, counts, args.reps, args.cold)
            line = {"type": type_name, "shape": shape, "cold": args.cold,
                    "rows_x_cols": [rows, cols],
                    "one_row_ms": {b: got[b][1]["ms"] for b in got}}
            for b in got:
                line[f"x_one_row_{b}"] = {r: got[b][r]["x_one_row"] for r in counts[1:]}
            if "baseline" in got:  # R rows' time on this build over the baseline's
                line["x_baseline"] = {r: round(got["this"][r]["ms"] / got["baseline"][r]["ms"],
                                               2) for r in counts}
            print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
