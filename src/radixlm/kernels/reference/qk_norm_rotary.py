"""QK-norm then rotary in one call: Qwen3's and Gemma 3's query and key heads, each
RMS-normalised over the head dimension (query heads by one weight, key heads by another)
and then rotated by the forward's gathered cos/sin rows.

The reference is the two steps as the decoder took them one after the other (RMSNorm of the
head rows, :func:`~.rotary.rotary_rows_ref` on the query and key heads together); a kernel
set's fused version computes the same numbers without the ``[T, Hq + Hkv, D]`` tensor in
between and the query / key copies after it.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from .rms_norm import rms_norm_ref
from .rotary import rotary_rows_ref


def qk_norm_rotary_ref(qk: torch.Tensor, num_q_heads: int, q_weight: torch.Tensor,
                       k_weight: torch.Tensor, eps: float, cos: torch.Tensor, sin: torch.Tensor
                       ) -> tuple[torch.Tensor, torch.Tensor]:
    """``(q [T, Hq, D], k [T, Hkv, D])`` from ``qk`` [T, Hq + Hkv, D] (query heads first; a
    view of the fused QKV rows): every head RMS-normalised (``q_weight`` / ``k_weight`` [D])
    and rotated by ``cos`` / ``sin`` rows [T, 1, D] (:func:`~.rotary.rotary_rows`)."""
    return qk_norm_rotary_with(rms_norm_ref, rotary_rows_ref, qk, num_q_heads, q_weight,
                               k_weight, eps, cos, sin)


def qk_norm_rotary_with(rms_norm: Callable[..., torch.Tensor],
                        rotary_rows: Callable[..., torch.Tensor], qk: torch.Tensor,
                        num_q_heads: int, q_weight: torch.Tensor, k_weight: torch.Tensor,
                        eps: float, cos: torch.Tensor, sin: torch.Tensor
                        ) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`qk_norm_rotary_ref` on a kernel set's ``rms_norm`` and ``rotary_rows``."""
    t, _, d = qk.shape
    q = rms_norm(qk[:, :num_q_heads].reshape(-1, d), q_weight, eps).view(t, num_q_heads, d)
    k = rms_norm(qk[:, num_q_heads:].reshape(-1, d), k_weight, eps).view(t, -1, d)
    out = rotary_rows(torch.cat((q, k), 1), cos, sin)
    return out[:, :num_q_heads], out[:, num_q_heads:]
