"""The interface every kernel set implements: one frozen record of callables.

The model layers receive a :class:`KernelOps` at construction and call only through it, so
the torch references (:data:`~radixlm.kernels.reference.ops.TORCH_OPS`) and the Triton kernels
(:data:`~radixlm.kernels.triton.ops.TRITON_OPS`) swap freely. This module imports no kernel
of either set, so both can import it without a circle.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from .reference.decode_attention import DecodePlan


@dataclass(frozen=True)
class KernelOps:
    """A consistent set of kernels; every field has the signature of its ``*_ref``.

    ``plan_decode`` belongs to the set because only the set knows what its
    ``decode_attention`` wants as ``plan=``: it takes the signature of
    :func:`~radixlm.kernels.reference.decode_attention.plan_decode_padded` (padded slots ``[B, L]``,
    lengths ``[B]``, page size, sliding window, workspace) and returns the plan, or ``None``
    when the set's decode attention needs none. The caller builds it once per forward and
    window size and hands the same plan to every layer.

    ``rotary_rows``, where a set offers it, rotates query and key heads together with cos/sin
    rows gathered once per forward (signature of
    :func:`~radixlm.kernels.reference.rotary.rotary_rows_ref`); sets without it get ``rotary``
    per layer.

    ``silu_mul``, where a set offers it, is the gated MLP's ``silu(gate) * up`` on the fused
    gate/up rows (signature of :func:`~radixlm.kernels.reference.silu_mul.silu_mul_ref`); the model
    takes the reference where it is ``None``; ``gelu_tanh_mul`` likewise for Gemma's
    ``gelu_tanh(gate) * up`` (:func:`~radixlm.kernels.reference.silu_mul.gelu_tanh_mul_ref`).

    ``qk_norm_rotary``, where a set offers it (with ``rotary_rows``), is Qwen3's / Gemma 3's
    QK-norm and rotary in one call, returning contiguous ``(q, k)`` (signature of
    :func:`~radixlm.kernels.reference.qk_norm_rotary.qk_norm_rotary_ref`; the same numbers
    as the set's ``rms_norm`` then ``rotary_rows``); the model takes those two where it is
    ``None``.

    ``norm_add_rms_norm(x, pre_weight, residual, weight, eps)``, where a set offers it, is
    Gemma 3's sandwich step ``fused_add_rms_norm(rms_norm(x, pre_weight), residual,
    weight)`` in one call (the same numbers as those two of the set, on float32 rows).
    """

    name: str
    rms_norm: Callable[..., torch.Tensor]
    fused_add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]]
    store_kv: Callable[..., None]
    plan_decode: Callable[..., DecodePlan | None]
    decode_attention: Callable[..., torch.Tensor]
    extend_attention: Callable[..., torch.Tensor]
    apply_token_bitmask: Callable[..., None]
    rotary_rows: Callable[..., torch.Tensor] | None = None
    silu_mul: Callable[..., torch.Tensor] | None = None
    gelu_tanh_mul: Callable[..., torch.Tensor] | None = None
    qk_norm_rotary: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
    norm_add_rms_norm: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None
