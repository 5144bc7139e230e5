"""radixlm: a structured-generation language and serving runtime for LLMs.

``import radixlm as sgl`` runs SGLang frontend programs unchanged. The language is imported
eagerly (pure Python); the engine, the HTTP backends and their heavy dependencies (torch,
transformers, requests) load on first use.
"""

from typing import Any

from .lang.api import (
    Anthropic,
    LiteLLM,
    OpenAI,
    VertexAI,
    assistant,
    assistant_begin,
    assistant_end,
    flush_cache,
    function,
    gen,
    gen_int,
    gen_string,
    get_server_info,
    image,
    select,
    set_default_backend,
    system,
    system_begin,
    system_end,
    user,
    user_begin,
    user_end,
    video,
)
from .lang.choices import (
    greedy_token_selection,
    token_length_normalized,
    total_logprob,
    unconditional_likelihood_normalized,
)
from .lang.global_config import global_config
from .version import __version__

_LAZY = {
    "Engine": ("radixlm.runtime.api.engine", "Engine"),
    "Runtime": ("radixlm.lang.backend.runtime", "Runtime"),
    "RuntimeEndpoint": ("radixlm.lang.backend.runtime_endpoint", "RuntimeEndpoint"),
    "EngineBackend": ("radixlm.lang.backend.engine_backend", "EngineBackend"),
    "tools_prompt": ("radixlm.lang.backend.tool_calls", "tools_prompt"),
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'radixlm' has no attribute {name!r}")


__all__ = [
    "Anthropic", "Engine", "EngineBackend", "LiteLLM", "OpenAI", "Runtime", "RuntimeEndpoint",
    "VertexAI", "__version__", "assistant", "assistant_begin", "assistant_end", "flush_cache",
    "function", "gen", "gen_int", "gen_string", "get_server_info", "global_config",
    "greedy_token_selection", "image", "select", "set_default_backend", "system",
    "system_begin", "system_end", "token_length_normalized", "tools_prompt", "total_logprob",
    "unconditional_likelihood_normalized", "user", "user_begin", "user_end", "video",
]
