"""Times the kernels on raw GGUF blocks (``kernels/cpu/gguf_blocks.py``) per block type.

For each type and matrix shape (random blocks; the values do not matter to the speed), one
thread, median thread CPU time of ``--reps`` calls (ms; CPU time, so other processes on a
shared machine do not count):

* ``blocks``: :class:`GGUFBlockLinear` on the raw blocks (VNNI, the default tiles' order:
  above 1 row the tiled kernel, passes of 128 rows; at 1 row the lanes kernel);
* ``passes8`` (above 8 rows): the same in passes of 8 rows over W for every type
  (``tiles=False``, the kernel before the tiles), and ``passes8/blocks``, its time over
  ``blocks``' (side by side in one run: the ratio is what to compare on a shared machine);
* ``tiled``: the measured alternative for prefill, W dequantized tile by tile into torch's GEMM
  (``path="tiled"``; the default runs ``blocks`` in passes);
* ``f32``: ``F.linear`` on W dequantized once to float32 (today's path; 4 bytes a weight);
* ``fx24``: the exact 24-bit digit-plane kernel (``q4_gemv``) on its repacked tiles, for the
  types it takes (Q4_0, Q4_1, Q8_0): the cost of float32-faithful activations;
* ``dequant``: decoding all of W to float32 once (ms, into an allocated buffer).

``blocks_GOPs``: ``blocks``' rate, 2 rows cols T operations per call. Shapes (rows x cols):
SmolLM2's MLP (576 x 1536), an 8B model's (4096 x 14336, ``--big``) and Gemma 3 270M's
(``--gemma``: 2048 x 640 gate/up, 1024 x 640 q, 256 x 640 k/v, 640 x 2048 down, 640 x 1024
o; a type runs where its block size divides cols)::

    python benchmarks/gguf_block_kernels.py                 # 576 x 1536 only
    python benchmarks/gguf_block_kernels.py --big --reps 7  # also 4096 x 14336
    python benchmarks/gguf_block_kernels.py --gemma --rows 128 --types Q5_0,Q8_0,Q4_K
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from radixlm.kernels.cpu.gguf_blocks import (
    GGUFBlockLinear,
    gguf_block_dequantize,
    gguf_block_linear,
    gguf_block_types,
    gguf_blocks_vnni,
)
from radixlm.kernels.reference.gguf_blocks import GGUF_BLOCKS, random_gguf_raw

FX24_TYPES = ("Q4_0", "Q4_1", "Q8_0")
# Gemma 3 270M's matrices (rows x cols): ffn gate/up, attn q, attn k/v, ffn down, attn output
GEMMA_SHAPES = [(2048, 640), (1024, 640), (256, 640), (640, 2048), (640, 1024)]


def processor() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def median_ms(fn: Callable[[], object], reps: int) -> float:
    fn()  # warm
    times = []
    for _ in range(reps):
        start = time.thread_time()
        fn()
        times.append(time.thread_time() - start)
    return round(1e3 * statistics.median(times), 3)


def fx24_weight(w: torch.Tensor, type_name: str):
    """The dequantized W re-expressed as q4_gemv's int4/int8 codes (same bytes streamed)."""
    from radixlm.kernels.cpu.q4_gemv import GroupedGemvWeight
    n, k = w.shape
    g = w.view(n, k // 32, 32)
    if type_name == "Q8_0":
        scale = g.abs().amax(-1).clamp_min(1e-8) / 127
        codes = (g / scale[..., None]).round().clamp(-127, 127).to(torch.int8).view(n, k)
        return GroupedGemvWeight.pack_int8(codes, scale)
    lo, hi = g.amin(-1), g.amax(-1)
    scale = ((hi - lo) / 15).clamp_min(1e-8)
    codes = ((g - lo[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.uint8)
    return GroupedGemvWeight.pack_int4(codes.view(n, k), scale, lo)


def bench_type(type_name: str, rows: int, cols: int, row_counts: list[int], reps: int) -> dict:
    gen = torch.Generator().manual_seed(0)
    raw = random_gguf_raw(type_name, rows, cols, gen)
    out: dict = {"type": type_name, "shape": [rows, cols], "raw_MB": round(raw.numel() / 1e6, 2)}
    w = gguf_block_dequantize(raw, type_name, cols)  # into a buffer: no page faults timed
    out["dequant"] = median_ms(lambda: gguf_block_dequantize(raw, type_name, cols, out=w), reps)
    fx24 = None
    if type_name in FX24_TYPES:
        from radixlm.kernels.cpu.q4_gemv import grouped_gemv_linear, q4_gemv_available
        if q4_gemv_available():
            fx24 = (fx24_weight(w, type_name), grouped_gemv_linear)
    layer = GGUFBlockLinear(raw, type_name, cols, path="vnni", tiles=True)
    for t in row_counts:
        x = torch.randn(t, cols, generator=gen)
        row = {"blocks": median_ms(lambda x=x: layer(x), reps),
               "f32": median_ms(lambda x=x: F.linear(x, w), reps)}
        row["blocks_GOPs"] = round(2 * rows * cols * t / row["blocks"] / 1e6, 1)
        if t > 8:
            row["passes8"] = median_ms(lambda x=x: gguf_block_linear(
                x, raw, type_name, cols, "vnni", tiles=False), reps)
            row["passes8/blocks"] = round(row["passes8"] / row["blocks"], 2)
            row["tiled"] = median_ms(
                lambda x=x: gguf_block_linear(x, raw, type_name, cols, "tiled"), reps)
        if fx24 is not None:
            row["fx24"] = median_ms(lambda x=x: fx24[1](x, fx24[0]), reps)
        out[f"rows={t}"] = row
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=21)
    parser.add_argument("--rows", default="1,8,32,128", help="activation row counts")
    parser.add_argument("--big", action="store_true", help="also 4096 x 14336")
    parser.add_argument("--gemma", action="store_true", help="also Gemma 3 270M's shapes")
    parser.add_argument("--types", default=",".join(gguf_block_types()))
    args = parser.parse_args()
    if not gguf_blocks_vnni():
        raise SystemExit("gguf_blocks' VNNI path is unavailable here (build it / needs AVX-512)")
    torch.set_num_threads(1)
    shapes = [(576, 1536)] + ([(4096, 14336)] if args.big else []) + (GEMMA_SHAPES if args.gemma
                                                                      else [])
    row_counts = [int(r) for r in args.rows.split(",")]
    print(json.dumps({"processor": processor(), "torch_threads": torch.get_num_threads()}))
    for rows, cols in shapes:
        for type_name in args.types.split(","):
            if cols % GGUF_BLOCKS[type_name].elems:
                continue  # 640 inputs: not a whole number of K-quant super-blocks
            print(json.dumps(bench_type(type_name, rows, cols, row_counts, args.reps)),
                  flush=True)


if __name__ == "__main__":
    main()
