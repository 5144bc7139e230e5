"""Model implementations (Llama family) run by the model runner."""

from .llama import LlamaForCausalLM

__all__ = ["LlamaForCausalLM"]
