"""Built-in tiny models: generated corpus, trained byte-level BPE, seeded weights of each
served family (Llama, Qwen2, Qwen3, Phi-3).

Imports nothing else of radixlm; its names are re-exported here for the CLI and the tests.
"""

from .builder import TinyModelSpec, build_tiny_model, ensure_tiny_model
from .presets import ARCHS, SIZES

__all__ = ["ARCHS", "SIZES", "TinyModelSpec", "build_tiny_model", "ensure_tiny_model"]
