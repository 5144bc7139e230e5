"""Process-wide settings of the language (SGLang's ``global_config``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class GlobalConfig:
    """Mutable settings read by the interpreter and the backends.

    ``default_backend`` is what :func:`radixlm.set_default_backend` sets. With
    ``enable_precache_with_tracing`` a ``run_batch`` traces its program once and prefills the
    constant text it starts with (when longer than ``precache_min_chars``) before the batch.
    """

    verbosity: int = 0
    default_backend: Any = None
    skip_special_tokens_in_output: bool = True
    spaces_between_special_tokens_in_out: bool = True
    enable_precache_with_tracing: bool = True
    enable_parallel_encoding: bool = True
    precache_min_chars: int = 64


global_config = GlobalConfig()
