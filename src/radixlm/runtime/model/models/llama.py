"""The Llama family: Llama, Qwen2 (qkv bias) and Mistral (sliding window).

All three are the shared decoder as is (``decoder.py``); their differences are config fields
(biases, windows, RoPE scaling) read by :class:`~..model_config.ModelConfig`.
"""

from __future__ import annotations

from .decoder import DecoderForCausalLM


class LlamaForCausalLM(DecoderForCausalLM):
    """Llama / Qwen2 / Mistral: the decoder with separate q/k/v and gate/up tensors."""
