"""The candidate implementations of one CPU linear, for float and weight-only quantized weights.

``--quantization int8`` stores each projection (and the LM head) as int8 codes with one scale
per output channel; ``int4`` as 4-bit codes in groups of 32/64/128 along the input with a
scale and a zero per group (``kernels/cpu/quant_linear.py``). Each quantized weight offers several
implementations, chosen per row count by measurement (``gemm_choice.py``): torch's
weight-only kernel (fast for a few rows), oneDNN's u8 x s8 GEMM and the native AVX-512 GEMV
for int8 (``kernels/cpu/int8_gemv.py``: batch-1 decode), and dequantize-then-``F.linear``
(fast for prefill).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from ...kernels.cpu.f32_amx_fx24_gemm import F32AmxFx24Linear, f32_amx_fx24_supports
from ...kernels.cpu.f32_amx_gemm import F32AmxLinear, f32_amx_gemm_available
from ...kernels.cpu.f32_gemv import F32GemvLinear, f32_gemv_available
from ...kernels.cpu.f32_panel_gemm import F32PanelLinear, f32_panel_gemm_available
from ...kernels.cpu.int8_amx import Int8AmxLinear, int8_amx_supports
from ...kernels.cpu.int8_gemv import Int8GemvLinear, int8_gemv_available
from ...kernels.cpu.int8_grouped import Int8GroupedWeight, int8_grouped_linear
from ...kernels.cpu.int8_onednn import OnednnInt8Weight, int8_onednn_linear, onednn_int8_available
from ...kernels.cpu.int8_vnni import Int8VnniLinear, Int8VnniWeight, int8_vnni_supports
from ...kernels.cpu.linear import PackedLinear, onednn_linear_available
from ...kernels.cpu.q4_gemv import (
    GroupedGemvWeight,
    PackArena,
    grouped_gemv_linear,
    q4_gemv_available,
)
from ...kernels.cpu.quant_linear import (
    Int4Weight,
    Int8Weight,
    int4_linear,
    int8_blocked_linear,
    int8_linear,
    quantize_int4,
    quantize_int8,
)
from .gemm_choice import GemmChooser, Impl

QUANTIZATIONS = ("int8", "int4", "gguf")
QuantWeight = Int8Weight | Int4Weight | Int8GroupedWeight


def float_impls(weight: torch.Tensor, allow_onednn: bool = True,
                arena: PackArena | None = None) -> dict[str, Impl]:
    """MKL ``F.linear`` on the plain weight, where available oneDNN on a packed copy and, for
    a contiguous float32 weight where built and the CPU has AVX-512, the native GEMV on the
    plain weight (``f32-avx512``: reads each weight tile once for all rows, with prefetch;
    for batch-1..32 decode, ``kernels/cpu/f32_gemv.py``) and the native GEMM on a copy packed
    in panels of 48 columns (``f32-panel``: 8-64 rows, arithmetic and memory stream kept
    going together, ``kernels/cpu/f32_panel_gemm.py``) and, where the CPU has AMX, the AMX
    GEMM on a copy packed in tile units (``f32-amx``: float32-accurate from three bfloat16
    pieces per operand; prefill, ``kernels/cpu/f32_amx_gemm.py``) and, where the CPU has
    AMX-INT8 and the weight is finite, the AMX GEMM on 24-bit fixed-point rows
    (``f32-amx-fx24``: 3 bytes a weight, packed into ``arena`` when given; decode,
    ``kernels/cpu/f32_amx_fx24_gemm.py``)."""
    w = weight.detach()
    impls: dict[str, Impl] = {"torch": lambda x: F.linear(x, w)}
    if allow_onednn and w.device.type == "cpu" and onednn_linear_available(w.dtype):
        packed = PackedLinear(w, None)
        impls["onednn"] = packed
    f32_cpu = w.is_cpu and w.dtype == torch.float32
    if f32_cpu and w.is_contiguous() and f32_gemv_available():
        impls["f32-avx512"] = F32GemvLinear(w)
    if f32_cpu and f32_panel_gemm_available():
        impls["f32-panel"] = F32PanelLinear(w)
    if f32_cpu and f32_amx_gemm_available():
        impls["f32-amx"] = F32AmxLinear(w)
    if f32_amx_fx24_supports(w):
        impls["f32-amx-fx24"] = F32AmxFx24Linear(w, arena)
    return impls


def quant_impls(weight: QuantWeight, arena: PackArena | None = None) -> dict[str, Impl]:
    """Torch's weight-only kernel, dequantize-then-``F.linear`` (for many rows) and, for
    int8, the same dequantized one block of output rows at a time (8-32 rows) and oneDNN's
    u8 x s8 GEMM on a prepacked copy (``int8-onednn``: float32-faithful activations as three
    byte planes; about 2x faster than torch's int8 kernel streaming SmolLM2's MLP weights)
    and, where built and the CPU has AVX-512, the native GEMV (``int8-avx512``: float32
    exact, reads the codes themselves with prefetch; ~2.5x oneDNN's streaming SmolLM2's
    weights at batch 1). int8, int4 in groups of 32 and a Q8_0 head also offer the native
    VNNI GEMV (``int8-vnni``: one scale per row, ``kernels/cpu/int8_vnni.py``; for int8 also
    its AMX form, ``int8-amx``, ``kernels/cpu/int8_amx.py``; ``int4-vnni``,
    ``q8_0-vnni``: ``kernels/cpu/q4_gemv.py``; float32-faithful activations) where it is built
    and the CPU has VNNI, packed into ``arena`` (weights back to back in build order, i.e.
    model order) when given.

    Only candidates that keep the quality bound are offered (perplexity within 1% of float32
    for int8): the int8 kernel runs float32 activations as two bfloat16 halves with float32
    scales; the single-bfloat16 variant (+1.66% on SmolLM2-135M) is not a candidate.
    """
    if isinstance(weight, Int8GroupedWeight):  # float32 candidates come with the float weight
        impls: dict[str, Impl] = {"q8_0": lambda x: int8_grouped_linear(x, weight)}
        if weight.group_size == 32 and q4_gemv_available():
            native = GroupedGemvWeight.pack_int8(weight.codes, weight.scales, arena)
            impls["q8_0-vnni"] = lambda x: grouped_gemv_linear(x, native)
        return impls
    kernel: Callable[[torch.Tensor, QuantWeight], torch.Tensor]
    kernel = int8_linear if isinstance(weight, Int8Weight) else int4_linear  # type: ignore
    name = "int8" if isinstance(weight, Int8Weight) else "int4"

    def dequant(x: torch.Tensor) -> torch.Tensor:
        if isinstance(weight, Int8Weight):  # scale the [M, N] output, not the [N, K] weight
            return F.linear(x, weight.codes.to(x.dtype)) * weight.scales.to(x.dtype)
        return F.linear(x, weight.dequantize(x.dtype))

    impls = {name: lambda x: kernel(x, weight), f"{name}-dequant": dequant}
    if isinstance(weight, Int4Weight):
        impls.update(_int4_native_impls(weight, arena))
    if isinstance(weight, Int8Weight):
        impls["int8-blocked"] = lambda x: int8_blocked_linear(x, weight)
        if onednn_int8_available():
            packed = OnednnInt8Weight.pack(weight)
            impls["int8-onednn"] = lambda x: int8_onednn_linear(x, packed)
        if int8_gemv_available():  # float32 FMAs on the widened codes (kernels/cpu/native)
            impls["int8-avx512"] = Int8GemvLinear(weight)
        if int8_vnni_supports(weight):  # VNNI on 24-bit fixed-point rows, 1 B/weight
            impls["int8-vnni"] = Int8VnniLinear(Int8VnniWeight.pack(weight, arena))
        if int8_amx_supports(weight):  # the same, on AMX tiles
            impls["int8-amx"] = Int8AmxLinear(weight, arena)
    return impls


def _int4_native_impls(weight: Int4Weight, arena: PackArena | None) -> dict[str, Impl]:
    if weight.group_size != 32 or not q4_gemv_available():
        return {}
    packed = GroupedGemvWeight.from_int4(weight.codes, weight.scales, weight.zeros, 32, arena)
    return {"int4-vnni": lambda x: grouped_gemv_linear(x, packed)}


def quantize_weight(weight: torch.Tensor, method: str, group_size: int) -> QuantWeight:
    """``weight`` [out, in] quantized by ``method`` (int8 per channel, or int4 grouped)."""
    if method == "int8":
        return quantize_int8(weight)
    if method == "int4":
        return quantize_int4(weight, group_size)
    raise ValueError(f"quantization must be one of {QUANTIZATIONS}, got {method!r}")


def kind_of(weight: QuantWeight | torch.Tensor) -> str:
    """The plan-cache kind of a weight (plans are shared per kind and shape)."""
    if isinstance(weight, Int8Weight):
        return "int8"
    if isinstance(weight, Int4Weight):
        return f"int4-g{weight.group_size}"
    if isinstance(weight, Int8GroupedWeight):
        return f"int8-g{weight.group_size}"
    return f"float-{weight.dtype}"




class CpuLinearBuilder:
    """The ``build`` hook of :meth:`DecoderForCausalLM.replace_linears` on CPU.

    Float weights get ``torch``/``onednn`` candidates (``cpu_gemm`` may fix one); with
    ``quantization`` every weight is quantized (``int8``/``int4``); for ``gguf`` the linears
    whose pieces are GGUF block types were put in place before load (``gguf_weights.py``) and
    never reach this builder: the ones it sees stay float. Every linear's implementation per
    row count is then measured.
    """

    HEAD_MAX_ROWS = 128  # the LM head sees one row per sampled token, not a whole prefill

    def __init__(self, chooser: GemmChooser, quantization: str | None, group_size: int,
                 cpu_gemm: str) -> None:
        self.chooser = chooser
        self.quantization = quantization
        self.group_size = group_size
        self.allow_onednn = cpu_gemm != "torch"
        self.kinds: dict[str, int] = {}  # weight kind -> linears built (start-up log)
        self.arena = PackArena()  # native packed weights, in build (= model) order
        # the float weights' fixed-point copies apart: a copy that loses everywhere then
        # frees its chunks rather than sharing them with the winners
        self.float_arena = PackArena()

    def __call__(self, name: str, weight: torch.Tensor, bias: torch.Tensor | None) -> nn.Module:
        qweight: QuantWeight | None = None
        if self.quantization == "int8" or (self.quantization == "int4" and name == "lm_head"):
            # int4 keeps the LM head at int8 (as llama.cpp keeps output.weight at 6-8 bits):
            # an int4 head cost +9.6% perplexity on SmolLM2, int8 +0.8%
            qweight = quantize_weight(weight, "int8", self.group_size)
        elif self.quantization == "int4" and weight.shape[1] % self.group_size == 0:
            qweight = quantize_weight(weight, "int4", self.group_size)
        # else float (counted below): int4 with in_features not a multiple of the group, and
        # gguf's linears that are not of a block type (the block ones never come here)
        if qweight is not None:
            impls, kind = quant_impls(qweight, self.arena), kind_of(qweight)
        else:
            impls = float_impls(weight, self.allow_onednn, self.float_arena)
            kind = kind_of(weight)
        self.kinds[kind] = self.kinds.get(kind, 0) + 1
        out_features, in_features = weight.shape
        max_rows = self.HEAD_MAX_ROWS if name == "lm_head" else None
        # deferred: the runner calls chooser.finish() once every linear is built
        return self.chooser.build(kind, impls, bias, in_features, out_features, max_rows,
                                  defer=True)
