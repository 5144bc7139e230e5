"""Linear layers with weights pre-packed for oneDNN (the CPU path's GEMM).

On CPU, ``torch.nn.functional.linear`` goes to MKL's sgemm, which repacks the weight on every
call and, on some non-Intel CPUs, takes a slow generic code path; oneDNN's JIT kernels with a
weight packed once at load time were 2-2.7x faster here for decode-sized inputs (M = 8-32 rows)
and ~2.3x for prefill-sized ones, and a row's result does not depend on the other rows in the
batch. Same fp32 arithmetic (summation order differs: ~1e-6 relative).
"""

from __future__ import annotations

import torch
from torch import nn

from ..reference.checks import check_dim, check_tensor


def onednn_linear_available(dtype: torch.dtype = torch.float32) -> bool:
    """True if this torch build can pack and run oneDNN linears for ``dtype`` on CPU."""
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        w = torch.randn(8, 16, dtype=dtype)
        packed = torch.ops.mkldnn._reorder_linear_weight(w)
        x = torch.randn(2, 16, dtype=dtype)
        out = torch.ops.mkldnn._linear_pointwise(x, packed, None, "none", [], "")
        ref = torch.nn.functional.linear(x.float(), w.float())
        return bool(torch.allclose(out.float(), ref, atol=0.1, rtol=0.05))
    except (RuntimeError, AttributeError):
        return False


class PackedLinear(nn.Module):
    """``y = x @ W.T + b`` with ``W`` packed for oneDNN; x [tokens, in_features]."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None) -> None:
        super().__init__()
        check_tensor("weight", weight, ndim=2, dtypes=(torch.float32, torch.bfloat16))
        if weight.device.type != "cpu":
            raise ValueError(f"weight: oneDNN packing is for CPU tensors, got {weight.device}")
        self.in_features, self.out_features = weight.shape[1], weight.shape[0]
        self.dtype = weight.dtype
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().contiguous())
        self.bias = None if bias is None else bias.detach().contiguous()

    @classmethod
    def from_linear(cls, linear: nn.Linear) -> PackedLinear:
        return cls(linear.weight, linear.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_tensor("x", x, ndim=2, dtypes=(self.dtype,))
        check_dim("x", x, 1, self.in_features)
        return torch.ops.mkldnn._linear_pointwise(x.contiguous(), self.packed, self.bias,
                                                  "none", [], "")
