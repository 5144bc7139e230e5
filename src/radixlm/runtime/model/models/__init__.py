"""Model implementations run by the model runner: the shared decoder (``decoder.py``) and one
file per family holding only its differences. May import kernels, memory and the model
package's config, batch and RoPE modules; nothing above the runtime's model layer.
"""

from .decoder import DecoderForCausalLM
from .gemma3 import Gemma3ForCausalLM
from .llama import LlamaForCausalLM
from .phi3 import Phi3ForCausalLM
from .qwen3 import Qwen3ForCausalLM

# ModelConfig.model_type -> the class that runs it
MODEL_CLASSES: dict[str, type[DecoderForCausalLM]] = {
    "llama": LlamaForCausalLM,
    "qwen2": LlamaForCausalLM,
    "mistral": LlamaForCausalLM,
    "qwen3": Qwen3ForCausalLM,
    "phi3": Phi3ForCausalLM,
    "gemma3_text": Gemma3ForCausalLM,
}

__all__ = ["MODEL_CLASSES", "DecoderForCausalLM", "Gemma3ForCausalLM", "LlamaForCausalLM",
           "Phi3ForCausalLM", "Qwen3ForCausalLM"]
