"""Phi-3: the shared decoder loaded from fused ``qkv_proj`` / ``gate_up_proj`` tensors.

Phi-3 stores q | k | v and gate | up already fused, in our row order, so they load whole
(``split_checkpoint = False``) and run as the decoder's fused matmuls. Its other differences
are RoPE details handled by the config and tables: ``partial_rotary_factor`` (only the first
``rotary_dim`` dims of a head rotate, in :class:`~.decoder.DecoderAttention`) and ``longrope``
scaling (``rope.py``).
"""

from __future__ import annotations

from .decoder import DecoderForCausalLM


class Phi3ForCausalLM(DecoderForCausalLM):
    """Phi-3 / Phi-3.5 / Phi-4-mini (``Phi3ForCausalLM``)."""

    split_checkpoint = False  # qkv_proj and gate_up_proj arrive fused
