"""Built-in tiny models: generated corpus, trained byte-level BPE, seeded Llama/Qwen2 weights."""

from .builder import TinyModelSpec, build_tiny_model, ensure_tiny_model
from .presets import ARCHS, SIZES

__all__ = ["ARCHS", "SIZES", "TinyModelSpec", "build_tiny_model", "ensure_tiny_model"]
